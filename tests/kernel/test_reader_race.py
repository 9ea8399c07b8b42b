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

"""Reads racing write-back writes: the v26.03 race (issues 22 and 33).

OCF since 36d2dfcc re-checks a request that waited for its cache-line lock
without its LOOKUP_HIT_INVALID lines (doc/source/admin/
opencas-hit-invalid-race.rst): a read that waited behind a write takes the
miss path, skips cleaning and backfills old data over dirty lines (lost
in Ceph after the flush, stale data returned), a wo or pass-through read
reads stale data from Ceph. Three reproducers, each over several passes
in one guest boot, a line per pass in RESULTS/reader-race.txt:

* fresh lines (:class:`ReaderRaceTestCase`, 4 KiB lines; 4 MiB per pass,
  ``OS_BRICK_CAS_RACE_MIB``): each fresh MiB
  read while it is written, by a buffered reader (dd without O_DIRECT, the
  page cache dropped first: readahead), an O_DIRECT reader (4 KiB
  requests, the writer holding one descriptor as QEMU does), and an
  O_DIRECT read of each 64 KiB chunk started together with its write
  (a thread each, one barrier: a VM reading blocks whose first write is in
  flight; on unpatched v26.03.2 it loses whole writes in every pass);
* lines larger than the IO (:class:`WideLineRaceTestCase`, 64 KiB lines):
  block 0 of each line written and acknowledged first, then a write of
  the rest of the line raced by a read of the whole line, in wb (the
  acknowledged block must survive the flush and be what the read
  returns) and wo (the read must return it);
* a drained core (the same, with the drain's IO class loaded on the wb
  core before the racing pair, before the drain's flush): its IO is
  pass-through, and the read must still return the acknowledged block.

After the detach flush librbd must read every written byte back. The
default run (CI) runs them unless the loaded module has the race unfixed
(an unpatched v26.03 build): there they run only by name
(``OS_BRICK_CAS_OPENCAS_PATCHES=none tools/run-kernel-tests.sh
test_reader_race``), and fail.
"""

import mmap
import os
import queue
import subprocess
import threading
from typing import Callable, Optional

import fixtures
import testtools
from testtools import content

from oslo_config import cfg

from os_brick_cas import casadm
from os_brick_cas import drain
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import known_defects
from tests.ceph import blockio
from tests.kernel import base
from tests import real_ceph

#: fresh MiBs written per pass (PASSES * ROUNDS at most 32: 8192 lines,
#: well inside the brd cache's free lines, so no eviction and no
#: sequential cut-off of a full cache; the passes share one attach).
#: 4 by default, 1 in CI (tools/run-tests.sh: three passes each, for its
#: time budget): a 16 MiB pass took ~3 min under TCG with the machine's
#: load at 7-13 (run ocf-patched-2); unpatched, the chunk reader lost
#: 176-496 blocks per 16 MiB pass and none in three 1 MiB passes at a
#: load of 5 (the wide-line cases lost data in every pass)
ROUNDS = int(os.environ.get('OS_BRICK_CAS_RACE_MIB', '4'))
#: passes per test, on one attach in one guest boot (boots, then
#: attaches, are the expensive part)
PASSES = int(os.environ.get('OS_BRICK_CAS_RACE_PASSES', '3'))
PASS_THROUGH_WRITES = 'Pass-Through writes [Requests]'
#: OCF's write total leaves the pass-through writes out
WRITE_REQUESTS = 'Write total [Requests]'
#: the writer's request size (dd bs=64k, and the held descriptor's)
CHUNK = 64 * 1024


RACE = 'ocf-hit-invalid-backfill'


def skip_unless_fixed_or_by_name(test: testtools.TestCase) -> None:
    """In a default run, skip where the loaded module has the race.

    That is an unpatched v26.03 build (no manifest listing the fix for
    the loaded srcversion); by name the reproducers run everywhere.
    """
    if os.environ.get('OS_BRICK_CAS_KERNEL_BY_NAME') == '1':
        return
    module = known_defects.loaded_module(cfg.CONF)
    if RACE in [defect.key for defect in known_defects.unfixed(module)]:
        test.skipTest('Open CAS %s has the write-back race unfixed (%s): '
                      'run by name, e.g. OS_BRICK_CAS_OPENCAS_PATCHES=none '
                      'tools/run-kernel-tests.sh test_reader_race'
                      % (module.version, module.note))


def record_pass(line: str) -> None:
    """A pass's line in RESULTS/reader-race.txt (kept if a later hangs)."""
    if base.RESULTS:
        with open(os.path.join(base.RESULTS, 'reader-race.txt'),
                  'a') as results:
            results.write(line + '\n')


def lost(block_map: str) -> int:
    """4 KiB blocks of a block map that do not hold what was written."""
    return len(block_map) - block_map.count('=')


class HeldWriter:
    """One O_DIRECT descriptor for a whole pass, as a VM's disk keeps it.

    64 KiB requests from a page-aligned buffer, fsync after each MiB (as
    dd conv=fsync); no close between MiBs, so udev's watch sees none.
    """

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
        self.buffer = mmap.mmap(-1, CHUNK)

    def write(self, offset: int, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            self.buffer[:] = data[start:start + CHUNK]
            if os.pwrite(self.fd, self.buffer, offset + start) != CHUNK:
                raise IOError('short O_DIRECT write at %d' % (offset + start))
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)
        self.buffer.close()


class ChunkRacer(HeldWriter):
    """The held writer, each 64 KiB write raced by an O_DIRECT read of it.

    A second thread reads the very chunk being written (its own O_DIRECT
    descriptor), both released together by a barrier: the read's lookup
    lands before, during or after the write's, as a VM's read of a block
    whose first write is still in flight would.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.reader = os.open(path, os.O_RDONLY | os.O_DIRECT)
        self.read_buffer = mmap.mmap(-1, CHUNK)
        self.barrier = threading.Barrier(2, timeout=60)
        self.offsets: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read_loop, daemon=True)
        self.thread.start()

    def _read_loop(self) -> None:
        while True:
            offset = self.offsets.get()
            if offset is None:
                return
            self.barrier.wait()
            os.preadv(self.reader, [self.read_buffer], offset)

    def write(self, offset: int, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            self.buffer[:] = data[start:start + CHUNK]
            self.offsets.put(offset + start)
            self.barrier.wait()
            if os.pwrite(self.fd, self.buffer, offset + start) != CHUNK:
                raise IOError('short O_DIRECT write at %d' % (offset + start))
        os.fsync(self.fd)

    def close(self) -> None:
        self.offsets.put(None)
        self.thread.join(60)
        os.close(self.reader)
        self.read_buffer.close()
        super().close()


class DdWriter:
    """A new dd (oflag=direct, bs=64k, conv=fsync) for each MiB."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offset: int, data: bytes) -> None:
        blockio.write_direct(self.path, offset, data)

    def close(self) -> None:
        pass


class ReaderRaceTestCase(base.KernelTestCase):

    caches = {2: 'wb'}

    def setUp(self) -> None:
        super().setUp()
        skip_unless_fixed_or_by_name(self)

    def race(self, label: str, reader: Optional[list[str]],
             writer: Callable[[str], object]) -> None:
        """PASSES passes of the race on one attach; every byte in Ceph.

        Each pass writes ROUNDS fresh MiBs of its own (lines no earlier
        pass touched, so every pass races never-cached lines); one detach
        flushes them all, then each pass's MiBs are checked in Ceph. One
        attach per test, not per pass: under TCG an attach and detach
        (rbd map, its udev rules, the flush, rbd unmap) cost ~50 s.
        """
        self.useFixture(fixtures.Timeout(120 + 150 * PASSES, gentle=True))
        self.assertLessEqual(PASSES * ROUNDS, 32, 'PASSES * ROUNDS MiB must '
                             'fit the 64 MiB brd cache without eviction')
        image = self.image('race-' + label, size_mb=PASSES * ROUNDS + 8)
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        path = info['path']
        passes = []
        counted = {casadm_output.DIRTY_BLOCKS: 0.0, WRITE_REQUESTS: 0.0,
                   PASS_THROUGH_WRITES: 0.0}
        for number in range(PASSES):
            written = self.race_pass('%s-%d' % (label, number), path,
                                     number * ROUNDS * base.MIB, reader,
                                     writer)
            [core] = self.cores()
            stats = casadm_output.parse_stats(self.casadm_ok(
                '-P', '-i', str(core.cache_id), '-j', str(core.core_id),
                '-o', 'csv'))
            # the counters are the core's since the attach: this pass's
            # share is the difference
            delta = {key: float(stats[key]) - before
                     for key, before in counted.items()}
            counted = {key: float(stats[key]) for key in counted}
            # what the cache gives back, to tell a write the cache holds
            # but never flushes (clean) from one it lost outright
            through_cache = [blockio.read_direct(path, offset, len(data))
                             for offset, data in written]
            passes.append(('%s-%d' % (label, number), written,
                           through_cache, delta))
        self.connector.disconnect_volume(props, info)
        summaries = [self.pass_summary(image, *one_pass)
                     for one_pass in passes]
        for summary in summaries:
            record_pass(summary)
        self.assert_clean_host()
        report = '\n'.join(summaries)
        self.addDetail('passes', content.text_content(report))
        self.assertNotIn(' LOST ', report)
        self.assertNotIn(' WRONG ', report)

    def race_pass(self, label: str, path: str, start: int,
                  reader: Optional[list[str]],
                  writer: Callable[[str], object]) -> list[tuple[int, bytes]]:
        """ROUNDS racing MiBs from *start*; what was written where."""
        written = []
        out = writer(path)
        try:
            for index in range(ROUNDS):
                offset = start + index * base.MIB
                data = blockio.pattern('race-%s-%d' % (label, index),
                                       base.MIB)
                base.run('blockdev', '--flushbufs', path)
                reading = None if reader is None else subprocess.Popen(
                    ['dd', 'if=%s' % path, 'of=/dev/null', 'bs=4k',
                     'skip=%d' % (offset // 4096), 'count=256',
                     'status=none'] + reader)
                out.write(offset, data)
                if reading:
                    reading.wait(timeout=120)
                written.append((offset, data))
        finally:
            out.close()
        return written

    @staticmethod
    def pass_summary(image: str, label: str,
                     written: list[tuple[int, bytes]],
                     through_cache: list[bytes],
                     delta: dict[str, float]) -> str:
        """A pass's line: dirty, requests, blocks lost in Ceph or cache."""
        ceph_maps, cache_maps = [], []
        in_ceph = real_ceph.read_ranges(
            base.CEPH_CONF, image,
            [(offset, len(data)) for offset, data in written])
        for (_offset, data), cached, got in zip(written, through_cache,
                                                in_ceph):
            ceph_maps.append(base.block_map(got, data))
            cache_maps.append(base.block_map(cached, data))
        lost_in_ceph = sum(map(lost, ceph_maps))
        wrong_in_cache = sum(map(lost, cache_maps))
        # not every line need be dirty: OCF may serve a write that races
        # the reader's miss on its lines pass-through, straight to Ceph;
        # what must hold is that every byte is in Ceph after the detach.
        # More write requests than ROUNDS * MIB / CHUNK: some 64 KiB
        # O_DIRECT writes reached the device in other pieces (the kernel
        # falls back to a buffered write when it cannot drop the page
        # cache of the range)
        pass_through = int(delta[PASS_THROUGH_WRITES])
        summary = ('%s: dirty %d of %d, write requests %d of %d '
                   '(%d pass-through), %s %d blocks in Ceph, cache %s '
                   '%d blocks' % (
                       label, int(delta[casadm_output.DIRTY_BLOCKS]),
                       ROUNDS * 256,
                       int(delta[WRITE_REQUESTS]) + pass_through,
                       ROUNDS * base.MIB // CHUNK, pass_through,
                       'LOST' if lost_in_ceph else 'lost', lost_in_ceph,
                       'WRONG' if wrong_in_cache else 'wrong',
                       wrong_in_cache))
        for index, (ceph, cache) in enumerate(zip(ceph_maps, cache_maps)):
            if lost(ceph) or lost(cache):
                summary += '\n  MiB %d: Ceph %s\n  MiB %d: cache %s' % (
                    index, ceph, index, cache)
        return summary

    def test_wb_writes_racing_a_buffered_reader_reach_ceph(self):
        # the reproducer as first found: dd per MiB, so udev's watch
        # probes (blkid, buffered) run after each MiB too
        self.race('buffered', [], DdWriter)

    def test_wb_writes_racing_a_direct_reader_reach_ceph(self):
        # a VM with cache=none: its own O_DIRECT reads and writes, one
        # open descriptor
        self.race('direct', ['iflag=direct'], HeldWriter)

    def test_wb_writes_racing_a_direct_read_of_each_chunk_reach_ceph(self):
        # a VM reading (O_DIRECT) the very blocks whose first write is in
        # flight: each 64 KiB write and a read of it start together
        self.race('chunk', None, ChunkRacer)


#: the wide-line reproducers' cache line size and request sizes
WIDE_LINE = 64 * 1024
BLOCK = 4096
#: lines per pass (2 MiB: the passes of a test, on one attach, stay well
#: inside a 64 MiB brd cache of 64 KiB lines)
WIDE_LINES = int(os.environ.get('OS_BRICK_CAS_RACE_WIDE_LINES', '32'))


class LineRacer:
    """O_DIRECT descriptors, a page-aligned buffer each, a racing reader.

    :meth:`race` starts a write of *data* at *offset* and an O_DIRECT read
    of *read_length* bytes at *read_offset* together (a thread each, one
    barrier) and returns what the read got.
    """

    def __init__(self, path: str) -> None:
        self.writer = os.open(path, os.O_WRONLY | os.O_DIRECT)
        self.reader = os.open(path, os.O_RDONLY | os.O_DIRECT)
        self.write_buffer = mmap.mmap(-1, WIDE_LINE)
        self.read_buffer = mmap.mmap(-1, WIDE_LINE)
        self.barrier = threading.Barrier(2, timeout=60)

    def write(self, offset: int, data: bytes) -> None:
        view = memoryview(self.write_buffer)[:len(data)]
        view[:] = data
        if os.pwrite(self.writer, view, offset) != len(data):
            raise IOError('short O_DIRECT write at %d' % offset)
        view.release()

    def race(self, offset: int, data: bytes, read_offset: int,
             read_length: int) -> bytes:
        got: list[bytes] = []

        def read() -> None:
            view = memoryview(self.read_buffer)[:read_length]
            self.barrier.wait()
            os.preadv(self.reader, [view], read_offset)
            got.append(bytes(view))
            view.release()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        self.barrier.wait()
        self.write(offset, data)
        thread.join(60)
        if not got:
            raise IOError('the racing read at %d did not finish' % read_offset)
        return got[0]

    def close(self) -> None:
        os.fsync(self.writer)
        os.close(self.writer)
        os.close(self.reader)
        self.write_buffer.close()
        self.read_buffer.close()


class WideLineRaceTestCase(base.KernelTestCase):
    """Cache lines larger than the IO: a read behind a later write.

    Per line: block 0 (4 KiB) is written and acknowledged; then the rest
    of the line (60 KiB) is written while the whole line is read. The
    read must return block 0 as written whatever the order, and after
    the detach flush Ceph must hold the whole line.
    """

    caches = {2: 'wb', 4: 'wo'}
    line_size_kib = {2: WIDE_LINE // 1024, 4: WIDE_LINE // 1024}

    def setUp(self) -> None:
        super().setUp()
        skip_unless_fixed_or_by_name(self)

    def passes(self, label: str, mode: str, drained: bool = False) -> None:
        """PASSES passes on one attach, each on lines of its own."""
        self.useFixture(fixtures.Timeout(120 + 150 * PASSES, gentle=True))
        pass_bytes = WIDE_LINES * WIDE_LINE
        image = self.image('wide-' + label,
                           size_mb=PASSES * pass_bytes // base.MIB + 8)
        props = self.props(image, mode)
        info = self.connector.connect_volume(props)
        racer = LineRacer(info['path'])
        [core] = self.cores()
        done, dirty_before = [], 0
        try:
            for number in range(PASSES):
                heads, tails, stale = self.wide_pass(
                    '%s-%d' % (label, number), racer, core,
                    number * pass_bytes, drained)
                dirty = self.dirty(core)
                done.append(('%s-%d' % (label, number), heads, tails, stale,
                             dirty - dirty_before))
                dirty_before = dirty
        finally:
            racer.close()
        self.connector.disconnect_volume(props, info)
        summaries = []
        for number, (name, heads, tails, stale, dirty) in enumerate(done):
            lost_blocks, maps = 0, []
            in_ceph = real_ceph.read_ranges(
                base.CEPH_CONF, image,
                [(number * pass_bytes + index * WIDE_LINE, WIDE_LINE)
                 for index in range(WIDE_LINES)])
            for index, got in enumerate(in_ceph):
                expected = heads[index] + tails[index]
                if got != expected:
                    lost_blocks += lost(base.block_map(got, expected))
                    maps.append('  line %d: Ceph %s' % (
                        index, base.block_map(got, expected)))
            summary = ('%s (%s%s, %d KiB lines): dirty before detach %d, '
                       '%s %d blocks in Ceph, %s reads of %d returned an '
                       'old block 0' % (
                           name, mode, ' drained' if drained else '',
                           WIDE_LINE // 1024, dirty,
                           'LOST' if lost_blocks else 'lost', lost_blocks,
                           '%d STALE' % len(stale) if stale else '0 stale',
                           WIDE_LINES))
            summaries.append('\n'.join([summary] + maps))
            record_pass(summaries[-1])
        self.assert_clean_host()
        report = '\n'.join(summaries)
        self.addDetail('passes', content.text_content(report))
        self.assertNotIn(' LOST ', report)
        self.assertNotIn(' STALE ', report)

    def wide_pass(self, label: str, racer: LineRacer, core: casadm_output.Core,
                  start: int, drained: bool
                  ) -> tuple[list[bytes], list[bytes], list[int]]:
        """Heads, then tails raced by reads, on WIDE_LINES fresh lines.

        Returns the heads, the tails and the lines whose read returned an
        old block 0. A drained pass loads the drain's IO class after its
        heads are acknowledged and the table it replaced after its race,
        so the next pass's heads are cached (dirty) again.
        """
        heads = [blockio.pattern('head-%s-%d' % (label, index), BLOCK)
                 for index in range(WIDE_LINES)]
        tails = [blockio.pattern('tail-%s-%d' % (label, index),
                                 WIDE_LINE - BLOCK)
                 for index in range(WIDE_LINES)]
        stale = []
        # every head acknowledged (O_DIRECT, fsync) before any read
        for index, head in enumerate(heads):
            racer.write(start + index * WIDE_LINE, head)
        os.fsync(racer.writer)
        cas = casadm.Casadm()
        table = cas.list_io_classes(core.cache_id) if drained else None
        if drained:
            # the drain's first step (its IO class: the core's IO goes
            # pass-through), before its flush: the heads stay dirty
            cas.load_io_classes(core.cache_id,
                                drain.compose({core.core_id}))
        for index, tail in enumerate(tails):
            offset = start + index * WIDE_LINE
            got = racer.race(offset + BLOCK, tail, offset, WIDE_LINE)
            if got[:BLOCK] != heads[index]:
                stale.append(index)
        if table is not None:
            cas.load_io_classes(core.cache_id, table)
        return heads, tails, stale

    def test_wb_read_behind_a_write_to_the_same_wide_line(self):
        self.passes('wb', 'wb')

    def test_wo_read_behind_a_write_to_the_same_wide_line(self):
        self.passes('wo', 'wo')

    def test_pass_through_read_after_write_on_a_drained_core(self):
        self.passes('drained', 'wb', drained=True)
