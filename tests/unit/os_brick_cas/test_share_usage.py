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

"""The table the volumes' shares should give, casadm's per-class stats."""

import testtools

from os_brick_cas import exception
from os_brick_cas import io_class_table as tables
from os_brick_cas.opencas import casadm_output
from os_brick_cas import share_usage

Entry = tables.Entry
#: casadm -P -i 1 -d -o csv as statistics_view_csv.c prints several
#: records: the header once, then one line of values per class
#: (v26.03.2 columns, cut after the request counters)
CLASS_STATS = (
    'IO class ID,IO class name,Eviction priority,Max size,'
    'Occupancy [4KiB Blocks],Occupancy [%],Clean [4KiB Blocks],Clean [%],'
    'Dirty [4KiB Blocks],Dirty [%],Read hits [Requests],Read hits [%],'
    'Pass-Through reads [Requests],Pass-Through reads [%]\n'
    '0,unclassified,255,65%,1000,3.8,900,90.0,100,10.0,5,50.0,0,0.0\n'
    '1,core_id:eq:4&done,Pinned,25%,2048,7.8,2000,97.7,48,2.3,9,90.0,'
    '31,7.0\n')


def row(class_id, name, priority, allocation):
    return casadm_output.IoClass(class_id, name, priority, allocation)


class ExpectedTestCase(testtools.TestCase):

    def test_a_composed_table_is_what_its_asks_give(self):
        loaded = tables.compose([Entry(4, 25), Entry(9, 10)]).table
        self.assertEqual(loaded, tables.expected(
            loaded, {4: 25, 9: 10}, [4, 9, 11]).table)

    def test_a_cap_loaded_by_hand_is_set_back_to_the_ask(self):
        loaded = [row(0, 'unclassified', 255, 0.5),
                  row(1, 'core_id:eq:4&done', None, 0.5)]
        self.assertEqual(tables.compose([Entry(4, 25), Entry(9, 10)]).table,
                         tables.expected(loaded, {4: 25, 9: 10},
                                         [4, 9]).table)

    def test_a_lost_share_gets_its_class_when_percent_is_free(self):
        # 9 lost its 50% to 4's 60%; 4 is detached since
        loaded = tables.compose([Entry(4, 60), Entry(9, 50)]).table
        self.assertEqual(tables.compose([Entry(9, 50)]).table,
                         tables.expected(loaded, {9: 50}, [9]).table)
        still = tables.expected(loaded, {4: 60, 9: 50}, [4, 9])
        self.assertEqual(((9,), loaded), (still.unshared, still.table))

    def test_drains_stay_whatever_the_asks_say(self):
        loaded = tables.compose([Entry(4, 30, True), Entry(9, None, True),
                                 Entry(7, 20)]).table
        found = tables.expected(loaded, {4: 30, 7: 20}, [4, 7, 9])
        self.assertEqual(loaded, found.table)
        self.assertEqual({4, 9}, {e.core_id for e in tables.entries(
            found.table) if e.drained})

    def test_classes_of_gone_cores_are_dropped_unrecorded_shares_kept(self):
        loaded = tables.compose([Entry(4, 30), Entry(5, 20)]).table
        self.assertEqual(tables.compose([Entry(5, 20)]).table,
                         tables.expected(loaded, {}, [5]).table)


class IoClassStatsTestCase(testtools.TestCase):

    def test_one_record_per_class_by_column_name(self):
        self.assertEqual(
            [casadm_output.IoClassUsage(0, 'unclassified', 65, 1000, 100, 0),
             casadm_output.IoClassUsage(1, 'core_id:eq:4&done', 25, 2048, 48,
                                        31)],
            casadm_output.parse_io_class_stats(CLASS_STATS))

    def test_output_without_the_columns_is_an_error(self):
        self.assertRaises(exception.CasadmCommandFailed,
                          casadm_output.parse_io_class_stats,
                          'Cache Id,Occupancy [4KiB Blocks]\n1,5\n')


class CapTestCase(testtools.TestCase):

    def test_cap_is_whole_lines_rounded_up(self):
        # 1000 lines of 4 KiB: 25% is 250 lines; 33% of 1001 is 330.33
        self.assertEqual(250, share_usage.cap_blocks(25, 1000, 4))
        self.assertEqual(331, share_usage.cap_blocks(33, 1001, 4))
        # 64 KiB lines: 16 blocks each, 1000 blocks are 62 lines
        self.assertEqual(16 * 16, share_usage.cap_blocks(25, 1000, 64))

    def test_lost_is_asked_not_held_not_drained(self):
        self.assertTrue(share_usage.CoreShare(1, 30, None).lost)
        self.assertFalse(share_usage.CoreShare(1, 30, None, True).lost)
        self.assertFalse(share_usage.CoreShare(1, 30, 30).lost)
        self.assertFalse(share_usage.CoreShare(1, None, None).lost)
