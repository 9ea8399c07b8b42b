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

"""The data-true stand-in's IO-class caps (issue 35), over plain files.

Open CAS's rules as read from ocf_space.c / ocf_lru.c (v25.12.2,
v26.03.2): a class at its cap evicts only its own clean lines, and a miss
it cannot map passes through (reads) or write-invalidates (writes); a
pinned class is evicted only over its cap; dirty lines are never evicted.
No real-kernel golden of per-class occupancy exists yet
(tests/data/real-casadm has no ``-P -d`` output): these hold the stand-in
to the source-read rules only.
"""

import math
import os

import fixtures
import testtools

from cas_standin.datapath import engine as eng
from os_brick_cas import share_usage

LINE = eng.LINE
LINES = 20


def table(share: int, pinned: bool = True, class_0: int = None) -> list:
    """Core 1 in a share class, core 2 in class 0 (what shares leave)."""
    class_0 = 100 - share if class_0 is None else class_0
    return [eng.IoClass(0, 'unclassified', 255, class_0 / 100),
            eng.IoClass(1, 'core_id:eq:1&done', None if pinned else 255,
                        share / 100)]


class CapsTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.cores = {}
        for core_id in (1, 2):
            path = os.path.join(tmp, 'core%d' % core_id)
            with open(path, 'wb') as f:
                f.truncate(256 * LINE)
            self.cores[core_id] = path
        self.ssd = os.path.join(tmp, 'ssd')

    def start(self, mode: str, share: int, pinned: bool = True,
              class_0: int = None):
        engine = eng.CacheEngine(self.ssd, LINES, mode)
        engine.create()
        for core_id, path in self.cores.items():
            engine.attach_core(core_id, path)
        engine.load_io_classes(table(share, pinned, class_0))
        self.addCleanup(engine.close)
        return engine

    def read_lines(self, engine, core_id: int, lines: range) -> None:
        for n in lines:
            engine.read(core_id, n * LINE, LINE)

    def on_core(self, core_id: int, line: int) -> bytes:
        with open(self.cores[core_id], 'rb') as f:
            f.seek(line * LINE)
            return f.read(LINE)

    def test_a_class_never_holds_more_than_its_cap(self):
        engine = self.start('wt', 25)
        cap = math.ceil(25 * LINES / 100)
        self.read_lines(engine, 1, range(100))
        self.assertEqual(cap, engine.occupancy(1))
        # the product reads the same cap from casadm's figures
        self.assertEqual(cap, share_usage.cap_blocks(25, LINES, 4))
        # its newest lines stay (it evicts its own LRU lines)
        engine.read(1, 99 * LINE, LINE)
        self.assertEqual(1, engine.core_stats[1].read_hits)

    def test_a_noisy_class_0_cannot_push_a_pinned_share_out(self):
        engine = self.start('wt', 25)
        self.read_lines(engine, 1, range(5))       # the quiet working set
        self.read_lines(engine, 2, range(200))     # the noisy neighbour
        self.assertEqual(5, engine.occupancy(1))
        self.assertEqual(LINES - 5, engine.occupancy(2))
        hits = engine.core_stats[1].read_hits
        self.read_lines(engine, 1, range(5))
        self.assertEqual(hits + 5, engine.core_stats[1].read_hits)

    def test_a_class_at_its_cap_with_only_dirty_lines_passes_through(self):
        engine = self.start('wb', 10)       # cap: 2 lines
        engine.write(1, 0, b'A' * LINE)
        engine.write(1, LINE, b'B' * LINE)
        self.assertEqual((2, 2), (engine.occupancy(1),
                                  engine.dirty_lines(1)))
        # a read miss: nothing of its own is clean, so it passes through
        self.assertEqual(b'\0' * LINE, engine.read(1, 5 * LINE, LINE))
        self.assertEqual(1, engine.core_stats[1].pass_through_reads)
        # a write miss goes straight to the core (write-invalidate)
        engine.write(1, 6 * LINE, b'C' * LINE)
        self.assertEqual(b'C' * LINE, self.on_core(1, 6))
        self.assertEqual(1, engine.core_stats[1].pass_through_writes)
        # the dirty lines were never evicted, and flush writes them
        self.assertEqual(2, engine.dirty_lines(1))
        self.assertEqual(b'\0' * LINE, self.on_core(1, 0))
        engine.flush(1)
        self.assertEqual(b'A' * LINE, self.on_core(1, 0))
        self.assertEqual(b'B' * LINE, self.on_core(1, 1))

    def test_with_caps_over_100_only_pinning_protects_a_share(self):
        # class 0 at 100 % besides a 25 % share: class 0 under its cap
        # takes lines of classes whose priority value is at least its own
        for pinned, kept in ((False, 0), (True, 5)):
            if os.path.exists(self.ssd):
                os.unlink(self.ssd)
            engine = self.start('wt', 25, pinned=pinned, class_0=100)
            self.read_lines(engine, 1, range(5))
            self.read_lines(engine, 2, range(200))
            self.assertEqual(kept, engine.occupancy(1), pinned)
            engine.close()
