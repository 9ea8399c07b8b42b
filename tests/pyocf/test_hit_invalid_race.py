"""pyocf reproducers for the LOOKUP_HIT_INVALID resume race (issue 33).

A request that waits for a cache-line lock is resumed through
ocf_engine_check(), which rebuilds req->info with
ocf_engine_update_req_info(). Unpatched OCF of Open CAS v26.03.x only
re-tests the valid and dirty bits of LOOKUP_HIT entries there, so a line
that was LOOKUP_HIT_INVALID at lookup (mapped, not yet valid: a write-back
write has mapped it and holds its lock) counts as neither hit nor dirty
when the lock holder is done with it. A read then takes the miss path
without cleaning: it returns the core's old data and backfills it over the
line the write has just made dirty, and the next flush writes the old data
to the core over the acknowledged write.

Each case keeps a write in flight by holding its IO in a GatedVolume (no
timing: the volume keeps OCF's forward token), submits a read of the same
line while the write holds it, checks that the read waits (a case whose
reads did not wait fails: the race was not set up), then completes the
write. The read must return every block acknowledged before it was issued
(the block being written may read old or new), and after a flush the core
must hold every acknowledged write.

Run by tools/run-pyocf-tests.sh (PYTHONPATH is a built pyocf tree); each
case appends a line of figures to $OS_BRICK_CAS_PYOCF_RESULTS if set.
"""
from ctypes import c_bool
from ctypes import c_int
import os
import time

import pytest

from pyocf.ocf import OcfLib
from pyocf.types.cache import Cache
from pyocf.types.cache import CacheMode
from pyocf.types.cache import CleaningPolicy
from pyocf.types.core import Core
from pyocf.types.data import Data
from pyocf.types.io import IoDir
from pyocf.types.shared import CacheLineSize
from pyocf.types.shared import OcfCompletion
from pyocf.types.shared import SeqCutOffPolicy
from pyocf.types.volume_core import CoreVolume
from pyocf.utils import Size

from gated_volume import GatedVolume

BLOCK = 4096
LINES = int(os.environ.get("OS_BRICK_CAS_PYOCF_LINES", "64"))
#: seconds for what takes milliseconds (CI runs this beside a TCG guest)
TIMEOUT = 60


def pattern(tag, line, block):
    """A 4 KiB block that says what it is: old (core) or new (written)."""
    text = f"{tag} line {line} block {block};".encode("ascii")
    return (text * (BLOCK // len(text) + 1))[:BLOCK]


def describe(data):
    """The first words of a block, for messages."""
    return bytes(data[:24]).split(b";")[0].decode("ascii", "replace")


class Rig:
    """A cache (GatedVolume) with one core (GatedVolume) of old blocks."""

    def __init__(self, mode, line_size, lines):
        self.line = int(line_size)
        self.blocks_per_line = self.line // BLOCK
        self.lines = lines
        self.cache_device = GatedVolume(Size.from_MiB(64))
        self.core_device = GatedVolume(Size.from_B(self.line * lines))
        for line in range(lines):
            for block in range(self.blocks_per_line):
                at = line * self.line + block * BLOCK
                self.core_device.data[at:at + BLOCK] = pattern(
                    "old", line, block)
        self.cache = Cache.start_on_device(
            self.cache_device, cache_mode=mode, cache_line_size=line_size)
        self.cache.set_cleaning_policy(CleaningPolicy.NOP)
        self.cache.add_core(Core.using_device(self.core_device))
        self.cache.set_seq_cut_off_policy(SeqCutOffPolicy.NEVER)
        self.queue = self.cache.get_default_queue()
        self.volume = CoreVolume(self.cache.cores[0])
        self.volume.open()
        # what each block should hold: the core's old data until a write
        # to it is acknowledged
        self.expected = {
            (line, block): pattern("old", line, block)
            for line in range(lines) for block in range(self.blocks_per_line)}

    def close(self):
        # a case that failed half-way may still hold a write: stopping
        # the cache would wait for it
        self.cache_device.release_any()
        self.core_device.release_any()
        self.volume.close()
        self.cache.stop()

    def submit(self, line, block, nblocks, direction, payload=None,
               io_class=0):
        """Start an IO on the exported core; returns (completion, data)."""
        length = nblocks * BLOCK
        data = (Data.from_bytes(payload) if payload is not None
                else Data(length))
        io = self.volume.new_io(self.queue, line * self.line + block * BLOCK,
                                length, direction, io_class, 0)
        io.set_data(data)
        done = OcfCompletion([("err", c_int)])
        io.callback = done.callback
        io.submit()
        return done, data

    def write(self, line, block):
        """Start a one-block write of new data; returns its completion."""
        payload = pattern("new", line, block)
        done, _ = self.submit(line, block, 1, IoDir.WRITE, payload)
        return done, payload

    def settle_queue(self):
        """Wait until the IO queue has run everything pushed onto it."""
        lib = OcfLib.getInstance()
        for _ in range(2):
            deadline = time.monotonic() + TIMEOUT
            while lib.ocf_queue_pending_io(self.queue):
                assert time.monotonic() < deadline, "IO queue never drained"
                time.sleep(0.001)
            self.queue.settle()

    def settle_cache(self):
        """Wait until no request is in flight.

        A read's backfill ends after the read has completed.
        """
        lib = OcfLib.getInstance()
        lib.ocf_dbg_cache_is_settled.restype = c_bool
        deadline = time.monotonic() + TIMEOUT
        while not lib.ocf_dbg_cache_is_settled(self.cache.cache_handle):
            assert time.monotonic() < deadline, "cache never settled"
            time.sleep(0.001)

    def stale_blocks(self, line, data, in_flight):
        """Blocks a read from block 0 of `line` got wrong.

        Wrong: not what was acknowledged before the read was issued, as
        (line, block, found). The block of the write in flight at the time
        may read old or new.
        """
        got = data.get_bytes()
        stale = []
        for block in range(len(got) // BLOCK):
            chunk = got[block * BLOCK:(block + 1) * BLOCK]
            allowed = {self.expected[(line, block)]}
            if block == in_flight:
                allowed.add(pattern("new", line, block))
            if chunk not in allowed:
                stale.append((line, block, describe(chunk)))
        return stale

    def lost_blocks(self):
        """Blocks of the core that differ from what was acknowledged."""
        core = self.core_device.get_bytes()
        lost = []
        for (line, block), want in sorted(self.expected.items()):
            at = line * self.line + block * BLOCK
            if core[at:at + BLOCK] != want:
                lost.append((line, block, describe(core[at:at + BLOCK])))
        return lost


def wait_ok(done, what):
    assert done.wait(TIMEOUT), f"{what} never completed"
    assert done.results["err"] == 0, f"{what} failed: {done.results['err']}"


def race_read_behind_write(rig, gate, line, write_block, read_blocks,
                           read_class=0):
    """Race a read of a line with a write to it that is held in flight.

    Hold a write of one block in `gate`, read `read_blocks` of the line
    from block 0 while it is held, then complete the write. Returns
    whether the read waited for the write and the stale blocks it read.
    """
    gate.hold_write_of(pattern("new", line, write_block))
    write_done, payload = rig.write(line, write_block)
    assert gate.held.wait(TIMEOUT), "the write never reached the volume"
    read_done, read_data = rig.submit(line, 0, read_blocks, IoDir.READ,
                                      io_class=read_class)
    rig.settle_queue()
    waited = not read_done.completed()
    gate.release()
    wait_ok(write_done, f"write of line {line} block {write_block}")
    wait_ok(read_done, f"read of line {line}")
    stale = rig.stale_blocks(line, read_data, write_block)
    rig.expected[(line, write_block)] = payload
    rig.settle_cache()
    return waited, stale


def report(case, mode, rig, waited, stale, lost):
    line = (f"pyocf-race case={case} mode={mode.name.lower()} "
            f"line={rig.line // 1024}KiB lines={rig.lines} "
            f"read_waited={waited} stale_blocks={len(stale)} "
            f"lost_blocks={len(lost)}")
    print(line)
    path = os.environ.get("OS_BRICK_CAS_PYOCF_RESULTS")
    if path:
        with open(path, "a") as results:
            results.write(line + "\n")


def check(case, mode, rig, waited, stale):
    """Flush, compare the core with what was acknowledged, report."""
    rig.cache.flush()
    lost = rig.lost_blocks()
    report(case, mode, rig, waited, stale, lost)
    assert waited == rig.lines, (
        f"only {waited} of {rig.lines} reads waited for the write: the "
        "race was not set up")
    assert not stale, (
        f"{len(stale)} stale blocks read, first: {stale[:4]}")
    assert not lost, (
        f"{len(lost)} acknowledged blocks lost in the core after flush, "
        f"first: {lost[:4]}")


def test_read_behind_first_write_of_a_line(ocf_ctx):
    """A read of a line whose first write-back write is in flight.

    The read may return old or new data, but its backfill must not
    overwrite the write (write-only reads do not backfill: no case here).
    """
    mode = CacheMode.WB
    rig = Rig(mode, CacheLineSize.LINE_4KiB, LINES)
    try:
        waited, stale = 0, []
        for line in range(LINES):
            did_wait, line_stale = race_read_behind_write(
                rig, rig.cache_device, line, 0, 1)
            waited += did_wait
            stale += line_stale
        check("fresh-line", mode, rig, waited, stale)
    finally:
        rig.close()


def race_whole_line_reads(rig, read_class=0):
    """Race a whole-line read behind a write of block 1, on every line.

    Block 0 of each line is written and acknowledged first. Returns
    (reads that waited, stale blocks).
    """
    waited, stale = 0, []
    for line in range(LINES):
        done, payload = rig.write(line, 0)
        wait_ok(done, f"write of line {line} block 0")
        rig.expected[(line, 0)] = payload
        did_wait, line_stale = race_read_behind_write(
            rig, rig.cache_device, line, 1, rig.blocks_per_line,
            read_class=read_class)
        waited += did_wait
        stale += line_stale
    return waited, stale


@pytest.mark.parametrize("mode", [CacheMode.WB, CacheMode.WO])
def test_wide_line_read_behind_a_write(ocf_ctx, mode):
    """A read of a whole 64 KiB line behind a write of its block 1.

    Block 0 was written and acknowledged before the read: the read must
    return it and the core must hold it after a flush.
    """
    rig = Rig(mode, CacheLineSize.LINE_64KiB, LINES)
    try:
        check("wide-line", mode, rig, *race_whole_line_reads(rig))
    finally:
        rig.close()


def test_pass_through_read_behind_a_write(ocf_ctx):
    """A pass-through read of a whole 64 KiB line behind a write.

    A write-back cache with an IO class whose mode is pass-through (as a
    drained core's IO in os-brick-cas is): block 0 written and
    acknowledged (dirty), then a pass-through read of the whole line waits
    behind a write-back write of block 1 and must return block 0.
    """
    rig = Rig(CacheMode.WB, CacheLineSize.LINE_64KiB, LINES)
    try:
        rig.cache.configure_partition(
            part_id=1, name="drain", max_size=100, priority=1,
            cache_mode=CacheMode.PT)
        check("pass-through", CacheMode.PT, rig,
              *race_whole_line_reads(rig, read_class=1))
    finally:
        rig.close()
