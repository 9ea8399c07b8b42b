#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""io_class_table.compose(): one table for shares and drains (pure)."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from os_brick_cas import drain
from os_brick_cas import io_class_table as tables
from os_brick_cas.opencas import casadm_output

Entry = tables.Entry


def row(class_id, name, priority, allocation):
    return casadm_output.IoClass(class_id, name, priority, allocation)


class ComposeTestCase(testtools.TestCase):

    def test_shares_are_pinned_classes_and_class_0_gets_the_rest(self):
        composed = tables.compose([Entry(4, 25), Entry(9, 10)])
        self.assertEqual([row(0, 'unclassified', 255, 0.65),
                          row(1, 'core_id:eq:4&done', None, 0.25),
                          row(2, 'core_id:eq:9&done', None, 0.10)],
                         composed.table)
        self.assertEqual((), composed.unshared)

    def test_drain_wins_over_a_share_and_remembers_it(self):
        composed = tables.compose([Entry(4, 25, drained=True), Entry(9, 10)])
        self.assertEqual([row(0, 'unclassified', 255, 0.90),
                          row(1, 'core_id:eq:4&done', 25, 0.0),
                          row(2, 'core_id:eq:9&done', None, 0.10)],
                         composed.table)
        # read back: the drained core keeps its share for the undrain
        self.assertEqual([Entry(4, 25, True), Entry(9, 10)],
                         tables.entries(composed.table))
        self.assertIsNone(tables.share_of(composed.table, 4))
        self.assertEqual(10, tables.share_of(composed.table, 9))

    def test_drains_without_shares_are_the_drain_tables_of_before(self):
        self.assertEqual([row(0, 'unclassified', 255, 1.0),
                          row(1, 'core_id:eq:3&done', 0, 0.0),
                          row(2, 'core_id:eq:8&done', 0, 0.0)],
                         drain.compose({8, 3}))
        self.assertEqual([row(0, 'unclassified', 255, 1.0)],
                         drain.compose(set()))

    def test_ids_spent_newest_shares_lose_first_drains_never(self):
        shares = [Entry(core, 1) for core in range(30)]
        drains = [Entry(100 + n, None, True) for n in range(4)]
        composed = tables.compose(shares + drains)
        self.assertEqual(33, len(composed.table))
        # 4 drains take 4 of the 32 ids: the 2 newest shares lose theirs
        self.assertEqual((29, 28), composed.unshared)
        self.assertEqual({100, 101, 102, 103},
                         drain.drained_cores(composed.table))
        self.assertEqual(list(range(28)), [
            e.core_id for e in tables.entries(composed.table)
            if not e.drained])

    def test_percent_spent_a_share_that_does_not_fit_loses(self):
        composed = tables.compose([Entry(1, 60), Entry(2, 50), Entry(3, 40)])
        self.assertEqual((2,), composed.unshared)
        self.assertEqual(0.0, composed.table[0].allocation)
        self.assertEqual([1, 3], [e.core_id for e in
                                  tables.entries(composed.table)])

    def test_more_drains_than_ids_refused(self):
        self.assertRaises(ValueError, tables.compose,
                          [Entry(n, None, True) for n in range(33)])

    def test_with_entry_keeps_age_order_and_drops_removed_cores(self):
        current = [Entry(1, 10), Entry(2, None, True), Entry(3, 20)]
        self.assertEqual(
            [Entry(1, 10), Entry(2, 30, False), Entry(3, 20)],
            tables.with_entry(current, 2, 30, False))
        self.assertEqual(current + [Entry(7, 5)],
                         tables.with_entry(current, 7, 5))
        self.assertEqual([Entry(1, 10), Entry(2, 15, True)],
                         tables.with_entry(current, 2, 15, existing={1, 2}))
        self.assertEqual([Entry(2, None, True), Entry(3, 20)],
                         tables.with_entry(current, 1, None))

    def test_hand_made_tables_are_not_composed(self):
        ours = tables.compose([Entry(1, 10), Entry(2, None, True)]).table
        self.assertTrue(tables.is_composed(ours))
        self.assertFalse(tables.is_composed(
            [row(0, 'unclassified', 255, 1.0),
             row(1, 'core_id:eq:1&done', None, 0.10)]))   # 110%
        self.assertFalse(tables.is_composed(
            [row(0, 'unclassified', 255, 1.0),
             row(3, 'core_id:eq:1&done', 0, 0.0)]))       # id gap
        self.assertFalse(tables.is_composed(
            [row(0, 'unclassified', 255, 1.0),
             row(1, 'request_size:le:4096', 0, 0.5)]))   # not ours

    def test_metadata_table_recomposed_for_the_cores_listed(self):
        """After a reboot: gone cores, foreign rules and class 0 fixed."""
        older = [row(0, 'unclassified', 255, 1.0),
                 row(1, 'core_id:eq:4&done', None, 0.50),
                 row(2, 'core_id:eq:9&done', 30, 0.0),
                 row(3, 'core_id:eq:5&done', None, 0.20),
                 row(4, 'request_size:le:4096', 0, 0.5)]
        composed = tables.recomposed(older, existing={4, 9})
        self.assertEqual([row(0, 'unclassified', 255, 0.50),
                          row(1, 'core_id:eq:4&done', None, 0.50),
                          row(2, 'core_id:eq:9&done', 30, 0.0)],
                         composed.table)
        self.assertIsNone(tables.recomposed(composed.table, {4, 9}))
        self.assertTrue(tables.is_default(tables.compose([]).table))
        self.assertFalse(tables.is_default(composed.table))


entry_lists = st.lists(
    st.builds(Entry, st.integers(0, 4095),
              st.one_of(st.none(), st.integers(1, 100)), st.booleans()),
    max_size=40, unique_by=lambda e: e.core_id).filter(
        lambda wanted: sum(e.drained for e in wanted) <= 32)


class ComposePropertiesTestCase(testtools.TestCase):

    @settings(max_examples=300, deadline=None)
    @given(entry_lists)
    def test_every_table_holds(self, wanted):
        composed = tables.compose(wanted)
        table = composed.table
        # at most 33 classes, ids 0..N in order, class 0 first
        self.assertEqual(list(range(len(table))),
                         [c.class_id for c in table])
        self.assertLessEqual(len(table), 33)
        self.assertEqual('unclassified', table[0].name)
        # the caps of all classes, class 0 included, sum to 100%
        self.assertEqual(100, sum(round(c.allocation * 100) for c in table))
        # every drain has its class at allocation 0
        self.assertEqual({e.core_id for e in wanted if e.drained},
                         drain.drained_cores(table))
        # every share has its class or is named unshared, never both
        granted = {e.core_id: e.share for e in tables.entries(table)
                   if not e.drained}
        asked = [e for e in wanted if not e.drained and e.share]
        self.assertEqual({e.core_id for e in asked},
                         set(granted) | set(composed.unshared))
        self.assertFalse(set(granted) & set(composed.unshared))
        for entry in asked:
            if entry.core_id in granted:
                self.assertEqual(entry.share, granted[entry.core_id])
        # what the table says is what was asked (drained shares too)
        self.assertEqual([e for e in wanted if e.drained or
                          e.core_id in granted], tables.entries(table))
        self.assertTrue(tables.is_composed(table))
        # unshared: newest first
        order = [e.core_id for e in wanted]
        self.assertEqual(sorted(composed.unshared, key=order.index,
                                reverse=True), list(composed.unshared))
