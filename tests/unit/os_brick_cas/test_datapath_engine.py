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

"""The data-true stand-in's cache engine, over plain files (no process)."""

import os

import fixtures
import testtools

from cas_standin.datapath import engine as eng

LINE = eng.LINE


class _Base(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.core = os.path.join(self.dir, 'core')
        with open(self.core, 'wb') as f:
            f.truncate(64 * LINE)
        self.ssd = os.path.join(self.dir, 'ssd')

    def start(self, mode, lines=16):
        engine = eng.CacheEngine(self.ssd, lines, mode)
        engine.create()
        engine.attach_core(1, self.core)
        self.addCleanup(engine.close)
        return engine

    def on_core(self, offset, length):
        with open(self.core, 'rb') as f:
            f.seek(offset)
            return f.read(length)


class EngineTestCase(_Base):

    def test_wb_write_stays_in_cache_until_flush(self):
        engine = self.start('wb')
        engine.write(1, 100, b'A' * 5000)
        self.assertEqual(b'\0' * 5000, self.on_core(100, 5000))
        self.assertEqual(b'A' * 5000, engine.read(1, 100, 5000))
        self.assertEqual(2, engine.dirty_lines())
        self.assertEqual(2, engine.flush())
        self.assertEqual(b'A' * 5000, self.on_core(100, 5000))
        self.assertEqual(0, engine.dirty_lines())

    def test_wt_writes_core_and_promotes(self):
        engine = self.start('wt')
        engine.write(1, 0, b'B' * LINE)
        self.assertEqual(b'B' * LINE, self.on_core(0, LINE))
        self.assertEqual(1, engine.occupancy())
        self.assertEqual(0, engine.dirty_lines())
        engine.read(1, 0, LINE)
        self.assertEqual(1, engine.stats.read_hits)

    def test_wa_write_miss_not_inserted(self):
        engine = self.start('wa')
        engine.write(1, 0, b'C' * LINE)
        self.assertEqual(b'C' * LINE, self.on_core(0, LINE))
        self.assertEqual(0, engine.occupancy())

    def test_wo_reads_not_promoted(self):
        engine = self.start('wo')
        engine.read(1, 0, LINE)
        self.assertEqual(0, engine.occupancy())
        engine.write(1, 0, b'D' * 10)
        self.assertEqual(1, engine.dirty_lines())

    def test_pt_write_cleans_dirty_overlap_first(self):
        engine = self.start('wb')
        engine.write(1, 0, b'E' * LINE)
        engine.mode = 'pt'
        engine.write(1, 10, b'F')
        self.assertEqual(b'E' * 10 + b'F' + b'E' * (LINE - 11),
                         self.on_core(0, LINE))
        self.assertEqual(0, engine.occupancy())
        self.assertEqual(1, engine.stats.pass_through_writes)

    def test_read_hit_ratio_counters(self):
        engine = self.start('wt')
        engine.read(1, 0, 2 * LINE)
        engine.read(1, LINE, 2 * LINE)
        engine.read(1, 0, 3 * LINE)
        self.assertEqual({'read_full_misses': 1, 'read_partial_misses': 1,
                          'read_hits': 1},
                         {k: v for k, v in engine.stats.as_dict().items()
                          if k.startswith('read')})

    def test_eviction_cleans_dirty_victim(self):
        engine = self.start('wb', lines=2)
        for n in range(3):
            engine.write(1, n * LINE, bytes([65 + n]) * LINE)
        self.assertEqual(b'A' * LINE, self.on_core(0, LINE))
        self.assertEqual(2, engine.occupancy())
        self.assertEqual(b'C' * LINE, engine.read(1, 2 * LINE, LINE))

    def test_crash_after_read_eviction_keeps_dirty_data_right(self):
        engine = self.start('wb', lines=2)
        engine.write(1, 0, b'A' * LINE)
        engine.write(1, LINE, b'B' * LINE)
        engine.read(1, 2 * LINE, LINE)      # evicts (cleans) line 0
        engine.close()                       # crash: no final save
        again = eng.CacheEngine.load(self.ssd)
        self.addCleanup(again.close)
        again.attach_core(1, self.core)
        again.flush()
        self.assertEqual(b'A' * LINE + b'B' * LINE, self.on_core(0, 2 * LINE))

    def test_torn_journal_row_is_ignored_on_load(self):
        engine = self.start('wb')
        engine.write(1, 0, b'T' * 2 * LINE)
        engine.close()                       # crash: journal, no snapshot
        with open(self.ssd + '.journal', 'a') as journal:
            journal.write('\n[1, 9, 5, tr')
        again = eng.CacheEngine.load(self.ssd)
        self.addCleanup(again.close)
        self.assertEqual((2, 2), (again.occupancy(), again.dirty_lines()))

    def test_remove_core_cleans(self):
        engine = self.start('wb')
        engine.write(1, 0, b'G' * LINE)
        engine.remove_core(1)
        self.assertEqual(b'G' * LINE, self.on_core(0, LINE))
        self.assertEqual(0, engine.occupancy())

    def test_reboot_keeps_dirty_lines_then_attach_cleans(self):
        engine = self.start('wb')
        engine.write(1, 0, b'H' * LINE)
        engine.close()
        again = eng.CacheEngine.load(self.ssd)
        self.addCleanup(again.close)
        self.assertEqual(1, again.dirty_lines())
        self.assertRaises(eng.CoreInactive, again.flush)
        again.attach_core(1, self.core)
        again.flush()
        self.assertEqual(b'H' * LINE, self.on_core(0, LINE))

    def test_destroyed_cache_file_is_reported(self):
        engine = self.start('wb')
        engine.write(1, 0, b'I' * 3 * LINE)
        engine.close()
        os.unlink(self.ssd)
        err = self.assertRaises(eng.CacheDeviceLost,
                                eng.CacheEngine.load, self.ssd)
        self.assertEqual(3, err.dirty_lines)
        self.assertIn('3 dirty line(s)', str(err))

    def test_replaced_cache_file_is_reported(self):
        engine = self.start('wb')
        engine.write(1, 0, b'J')
        engine.close()
        eng.CacheEngine(self.ssd + '2', 16).create()
        os.replace(self.ssd + '2', self.ssd)
        self.assertRaises(eng.CacheDeviceLost, eng.CacheEngine.load,
                          self.ssd)


class IoClassTestCase(_Base):

    def classes(self, *rows):
        return [eng.IoClass(0, 'unclassified', 255, 1.0)] + [
            eng.IoClass(*r) for r in rows]

    def test_allocation_zero_writes_go_to_core_after_cleaning(self):
        engine = self.start('wb')
        engine.write(1, 0, b'K' * LINE)
        engine.load_io_classes(self.classes((1, 'core_id:eq:1&done', 1,
                                             0.0)))
        engine.write(1, LINE, b'L' * 10)
        engine.write(1, 5, b'M')
        self.assertEqual(b'L' * 10, self.on_core(LINE, 10))
        self.assertEqual(b'K' * 5 + b'M' + b'K' * 10, self.on_core(0, 16))
        self.assertEqual(0, engine.occupancy())
        engine.read(1, 0, LINE)
        self.assertEqual(0, engine.occupancy())

    def test_last_match_wins_unless_done(self):
        engine = self.start('wb')
        engine.load_io_classes(self.classes((1, 'core_id:eq:1', 1, 0.5),
                                            (2, 'core_id:eq:1', 1, 0.0)))
        self.assertEqual(2, engine.classify(1).id)
        engine.load_io_classes(self.classes((1, 'core_id:eq:1&done', 1, 0.5),
                                            (2, 'core_id:eq:1', 1, 0.0)))
        self.assertEqual(1, engine.classify(1).id)
        self.assertEqual(0, engine.classify(2).id)

    def test_allocation_caps_class_occupancy(self):
        engine = self.start('wt', lines=16)
        engine.load_io_classes(self.classes((1, 'core_id:eq:1&done', 1,
                                             0.25)))
        engine.read(1, 0, 10 * LINE)
        self.assertEqual(4, engine.occupancy())

    def test_table_replaced_whole_and_kept_across_reboot(self):
        engine = self.start('wb')
        engine.load_io_classes(self.classes((1, 'core_id:eq:1', 1, 0.5),
                                            (2, 'core_id:eq:2', 1, 0.5)))
        engine.load_io_classes(self.classes((3, 'core_id:eq:3', 1, 0.1)))
        engine.close()
        again = eng.CacheEngine.load(self.ssd)
        self.addCleanup(again.close)
        self.assertEqual([0, 3], [c.id for c in again.io_classes])

    def test_at_most_33_classes(self):
        engine = self.start('wb')
        too_many = self.classes(*[(i, 'core_id:eq:%d' % i, 1, 0.1)
                                  for i in range(1, 34)])
        self.assertRaises(ValueError, engine.load_io_classes, too_many)
        engine.load_io_classes(too_many[:33])
        self.assertEqual(33, len(engine.io_classes))

    def test_cap_is_ceil_of_share_in_whole_percent(self):
        engine = self.start('wt', lines=16)
        # 0.104 -> 10 % of 16 lines = 1.6 -> 2 lines
        engine.load_io_classes(self.classes((1, 'core_id:eq:1&done', 1,
                                             0.104)))
        engine.read(1, 0, 10 * LINE)
        self.assertEqual(2, engine.occupancy())

    def test_allocation_zero_read_cleans_dirty_overlap_first(self):
        engine = self.start('wb')
        engine.write(1, 0, b'N' * LINE)
        engine.load_io_classes(self.classes((1, 'core_id:eq:1', None, 0.0)))
        self.assertEqual(b'N' * LINE, engine.read(1, 0, LINE))
        self.assertEqual(b'N' * LINE, self.on_core(0, LINE))
        self.assertEqual((0, 1), (engine.occupancy(),
                                  engine.stats.pass_through_reads))

    def test_pinned_class_kept_across_reboot(self):
        engine = self.start('wb')
        engine.load_io_classes(self.classes((4, 'core_id:eq:4', None, 0.5)))
        engine.close()
        again = eng.CacheEngine.load(self.ssd)
        self.addCleanup(again.close)
        self.assertEqual(eng.IoClass(4, 'core_id:eq:4', None, 0.5),
                         again.io_classes[1])

    def test_unsupported_rule_refused_and_table_kept(self):
        engine = self.start('wb')
        self.assertRaises(ValueError, engine.load_io_classes,
                          self.classes((1, 'file_size:gt:1', 1, 0.5)))
        self.assertEqual([0], [c.id for c in engine.io_classes])


class CountersTestCase(_Base):

    def test_counters_per_core_and_write_miss_kinds(self):
        other = os.path.join(self.dir, 'core2')
        with open(other, 'wb') as f:
            f.truncate(64 * LINE)
        engine = self.start('wb')
        engine.attach_core(2, other)
        engine.write(1, 0, b'O' * LINE)          # full miss
        engine.write(1, 0, b'P' * 2 * LINE)      # partial miss
        engine.write(1, 0, b'Q' * LINE)          # hit
        engine.read(2, 0, LINE)                  # full miss on core 2
        one, two = engine.core_stats[1], engine.core_stats[2]
        self.assertEqual((1, 1, 1, 0), (one.write_full_misses,
                                        one.write_partial_misses,
                                        one.write_hits,
                                        one.read_full_misses))
        self.assertEqual((0, 1), (two.write_hits + two.write_misses,
                                  two.read_full_misses))
        self.assertEqual(3, engine.stats.write_hits +
                         engine.stats.write_misses)
        self.assertEqual((2, 2, 1), (engine.occupancy(1),
                                     engine.dirty_lines(1),
                                     engine.occupancy(2)))

    def test_drop_core_discards_dirty_lines(self):
        engine = self.start('wb')
        engine.write(1, 0, b'R' * 3 * LINE)
        self.assertEqual(3, engine.drop_core(1))
        self.assertEqual(0, engine.occupancy())
        self.assertEqual(b'\0' * LINE, self.on_core(0, LINE))

    def test_detach_core_keeps_lines_for_try_add(self):
        engine = self.start('wb')
        engine.write(1, 0, b'S' * LINE)
        engine.detach_core(1)
        self.assertRaises(eng.CoreInactive, engine.flush, 1)
        engine.attach_core(1, self.core)
        self.assertEqual(1, engine.flush(1))
        self.assertEqual(b'S' * LINE, self.on_core(0, LINE))
