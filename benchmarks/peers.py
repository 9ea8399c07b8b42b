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

"""Open CAS side by side with bcache, dm-cache and dm-writecache (issue 36).

Runs inside the real-kernel guest, set up by the kernel runner::

    tools/run-kernel-tests.sh --bench-peers [--quick] [--dry-run]
        [--runtime S] [--range-mb N] [--image-mb N] [--stacks A,B]
        [--cas-variant NAME=MODE:KEY=VALUE,...]

In one run, on the same cache device (brd /dev/ram0, the same size for
every stack) in front of a fresh krbd image of the guest's Ceph per
stack: plain krbd; Open CAS wt and wb started from a host layout by the
product's host preparation (``host apply``) with the product's per-mode
defaults (layout_file.mode_defaults), or a variant of them
(``--cas-variant``), and attached by the product's CachedRBDConnector;
bcache writethrough and writeback (sequential_cutoff = the product's
seq-cutoff threshold); dm-cache smq writethrough and writeback (metadata
on /dev/ram3); dm-writecache. The
cases (peers_data.CASES) are the seed study's five, 4k QD1/QD16 random
read and write, a zipf working set larger than the cache and a
sequential scan through a warm cache. Figures per case: fio's average and
P99 latency and IOPS, the guest's busy CPU time per IO, the read hit
ratio where the cache counts one, dirty data over time (write-back
cases) and the time to drain it. Every stack is torn down after its
cases. ``--dry-run`` checks the prerequisites (modules, make-bcache,
dmsetup, fio, casadm) and prints the plan without IO.

Results: RESULTS/peers.json and peers.txt; on the host ``python
benchmarks/peers.py plot RESULTS/peers.json DIR`` draws DIR/peers.png.
Every figure is from a TCG guest over loopback memstore Ceph: relative
within the run, never a hardware figure.
"""

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from typing import Any, Callable, Iterator, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml   # noqa: E402

import kernel as kernel_bench   # noqa: E402  benchmarks/kernel.py
from os_brick_cas import casadm as casadm_mod   # noqa: E402
from os_brick_cas import exception   # noqa: E402
from os_brick_cas.host import layout_file   # noqa: E402
from os_brick_cas.host import prep   # noqa: E402
from os_brick_cas.opencas import casadm_output   # noqa: E402
import peers_data as data       # noqa: E402  benchmarks/peers_data.py

#: bcache's accounting period (300/22 s), and a margin
BCACHE_ACCOUNTING_S = 15
DM_NAME = 'peers-bench'
LABEL = kernel_bench.LABEL
#: the instance id a run on an operator's host uses unless told
HOST_CACHE_ID = 16384
MODULES = ('bcache', 'dm_cache', 'dm_cache_smq', 'dm_writecache',
           'cas_cache', 'rbd')
#: the guest's RAM disks besides
GUEST_MODULES = ('brd',)
TOOLS = ('make-bcache', 'dmsetup', 'fio', 'casadm', 'wipefs', 'blockdev')
DRAIN_TIMEOUT_S = 300   # --drain-timeout: waiting for a cache to clean
FLUSH_TIMEOUT_S = 300   # the product's flush at a wb detach
run = kernel_bench.run


@dataclasses.dataclass(frozen=True)
class Target(object):
    """Where a run measures: the devices it wipes, its Ceph, its ids.

    In the real-kernel guest: brd RAM disks, the guest's Ceph, instance 1.
    On an operator's host: the partitions named with ``--cache-device``
    and ``--metadata-device`` (wiped, so named again with ``--wipe``), a
    pool of the host's cluster and an instance id no instance uses.
    """

    cache_dev: str = '/dev/ram0'
    metadata_dev: str = '/dev/ram3'
    cache_id: int = 1
    ceph_conf: str = ''
    pool: str = kernel_bench.POOL
    rbd_user: Optional[str] = None     # None: the guest's Ceph
    #: opencas.conf the product's attach writes (a private copy on a host)
    opencas_conf: str = kernel_bench.OPENCAS_CONF

    @property
    def in_guest(self) -> bool:
        return self.rbd_user is None

    @property
    def label(self) -> str:
        if self.in_guest:
            return LABEL
        return ('host %s: cache %s, Ceph pool %s (%s) -- this host\'s '
                'figures' % (os.uname().nodename, self.cache_dev, self.pool,
                             self.ceph_conf))


def write_sysfs(path: str, value: str) -> None:
    """Write *value* to *path*; a refusal names both."""
    try:
        with open(path, 'w') as sysfs:
            sysfs.write(value)
    except OSError as error:
        raise OSError(error.errno, '%s (writing %r to %s)'
                      % (error.strerror, value, path)) from error


def read_sysfs(path: str) -> str:
    with open(path) as sysfs:
        return sysfs.read().strip()


def sectors(path: str) -> int:
    return int(run('blockdev', '--getsz', path))


def wipe(path: str) -> None:
    """Zero the first MiB of *path* (old superblocks, dm metadata)."""
    run('dd', 'if=/dev/zero', 'of=%s' % path, 'bs=1M', 'count=1',
        'oflag=direct')


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise RuntimeError('timed out after %.0f s waiting for %s'
                               % (timeout, what))
        time.sleep(0.5)
    return time.monotonic() - start


# -- the stacks ---------------------------------------------------------------

class Device(object):
    """A set-up stack: its block device and the cache's counters."""

    def __init__(self, stack: data.Stack, path: str):
        self.stack = stack
        self.path = path

    def read_counters(self) -> Optional[tuple[int, int]]:
        """(read hits, reads) so far; None: the stack counts none."""
        return None

    def settle_counters(self) -> None:
        """Until :meth:`read_counters` includes the IO done so far."""

    def dirty_bytes(self) -> Optional[int]:
        return None

    def set_cleaning(self, running: bool) -> None:
        """Stop (*running* False) or restart the stack's cleaning."""

    def drain(self) -> Optional[float]:
        """Seconds until no dirty data is left (cleaning running)."""
        return None


class CasDevice(Device):
    def __init__(self, stack: data.Stack, path: str, applied: list[str],
                 cache_id: int):
        super().__init__(stack, path)
        self.cache_id = cache_id
        #: what the product's host preparation did to start the instance
        self.applied = applied
        self.bench = kernel_bench.drain_bench.Bench(path, FLUSH_TIMEOUT_S)

    def read_counters(self) -> Optional[tuple[int, int]]:
        return kernel_bench.bench_cmd.read_counters(self.path)

    def dirty_bytes(self) -> Optional[int]:
        return self.bench.dirty() * 4096

    def set_cleaning(self, running: bool) -> None:
        policy = self.stack.cleaning if running else 'nop'
        kernel_bench.Host.cleaning(self.cache_id, policy)

    def drain(self) -> Optional[float]:
        # cleaning alone (the policy's own pace), as the peers drain
        return wait_for('Open CAS to clean', lambda: self.bench.dirty() == 0,
                        DRAIN_TIMEOUT_S)


class BcacheDevice(Device):
    def __init__(self, stack: data.Stack, path: str, sysfs: str):
        super().__init__(stack, path)
        self.sysfs = sysfs   # /sys/block/bcacheN/bcache

    def settle_counters(self) -> None:
        # bcache moves its per-request counts into stats_total on a timer
        # (stats.c, accounting_delay: every 300/22 s), so a case's hits
        # show up to 13.6 s after its last IO
        time.sleep(BCACHE_ACCOUNTING_S)

    def read_counters(self) -> Optional[tuple[int, int]]:
        hits = int(read_sysfs(self.sysfs + '/stats_total/cache_hits'))
        misses = int(read_sysfs(self.sysfs + '/stats_total/cache_misses'))
        return hits, hits + misses

    def dirty_bytes(self) -> Optional[int]:
        return data.parse_bcache_size(read_sysfs(self.sysfs + '/dirty_data'))

    def set_cleaning(self, running: bool) -> None:
        write_sysfs(self.sysfs + '/writeback_running', '1' if running else
                    '0')

    def drain(self) -> Optional[float]:
        write_sysfs(self.sysfs + '/writeback_running', '1')
        write_sysfs(self.sysfs + '/writeback_percent', '0')
        return wait_for('bcache writeback', lambda: self.dirty_bytes() == 0,
                        DRAIN_TIMEOUT_S)


class DmCacheDevice(Device):
    def __init__(self, stack: data.Stack, path: str, table: str):
        super().__init__(stack, path)
        self.table = table

    def status(self) -> dict[str, int]:
        return data.parse_dmcache_status(run('dmsetup', 'status', DM_NAME))

    def read_counters(self) -> Optional[tuple[int, int]]:
        status = self.status()
        return status['read_hits'], (status['read_hits'] +
                                     status['read_misses'])

    def dirty_bytes(self) -> Optional[int]:
        status = self.status()
        return status['dirty_blocks'] * status['block_sectors'] * 512

    def set_cleaning(self, running: bool) -> None:
        # migration_threshold 0: no background migration (writeback
        # included); dm-cache has no other switch for its cleaning
        run('dmsetup', 'message', DM_NAME, '0', 'migration_threshold',
            '2048' if running else '0')

    def drain(self) -> Optional[float]:
        # the documented way: reload with the cleaner policy
        start = time.monotonic()
        run('dmsetup', 'suspend', DM_NAME)
        run('dmsetup', 'reload', DM_NAME, '--table',
            self.table.replace(' smq 0', ' cleaner 0'))
        run('dmsetup', 'resume', DM_NAME)
        wait_for('dm-cache cleaner', lambda: self.dirty_bytes() == 0,
                 DRAIN_TIMEOUT_S)
        return time.monotonic() - start


class WritecacheDevice(Device):
    def status(self) -> dict[str, int]:
        return data.parse_writecache_status(
            run('dmsetup', 'status', DM_NAME))

    def read_counters(self) -> Optional[tuple[int, int]]:
        status = self.status()
        if 'read_hits' not in status:
            return None
        return status['read_hits'], status['read_blocks']

    def dirty_bytes(self) -> Optional[int]:
        # occupied blocks: dirty or under writeback (it keeps no clean
        # blocks past its low watermark)
        status = self.status()
        return (status['total_blocks'] - status['free_blocks']) * 4096

    def drain(self) -> Optional[float]:
        start = time.monotonic()
        run('dmsetup', 'message', DM_NAME, '0', 'cleaner')
        wait_for('dm-writecache cleaner', lambda: self.dirty_bytes() == 0,
                 DRAIN_TIMEOUT_S)
        return time.monotonic() - start


class Bed(kernel_bench.Host):
    """Images, the product's connector, one stack at a time."""

    def __init__(self, target: Target, port: str, workdir: str):
        super().__init__(target.ceph_conf, port, workdir, target.pool,
                         target.rbd_user)
        self.target = target

    def new_image(self, args: argparse.Namespace) -> str:
        return self.image('peers', args.image_mb, args.image_mb)

    @contextlib.contextmanager
    def krbd(self, args: argparse.Namespace) -> Iterator[str]:
        props, path = self.attach(self.new_image(args), None)
        try:
            yield path
        finally:
            self.detach(props, path)

    def start_cas(self, stack: data.Stack) -> list[str]:
        """Start the stack's instance as ``host apply`` does; its changes.

        The stack's host layout (the product's per-mode defaults and the
        variant's changes) goes through the product's own host preparation
        (os_brick_cas.host.prep): the start with its cache line size, the
        runtime parameters; the attach then gives the core the layout's
        sequential cut-off (core_tuning).
        """
        layout_path = os.path.join(self.workdir, 'host-layout.yaml')
        with open(layout_path, 'w') as out:
            yaml.safe_dump(stack.layout_document(self.target.cache_id,
                                                 self.target.cache_dev), out)
        with open(self.target.opencas_conf, 'w') as conf:
            conf.write('version=19.3.0\n[caches]\n[cores]\n')
        for name, value in (
                ('cache_instances', {stack.mode: str(self.target.cache_id)}),
                ('opencas_conf', self.target.opencas_conf),
                ('lock_path', self.workdir), ('state_path', self.workdir),
                ('host_layout', layout_path),
                ('flush_timeout', FLUSH_TIMEOUT_S), ('casadm_timeout', 60)):
            kernel_bench.CONF.set_override(name, value,
                                           group=kernel_bench.opts.GROUP)
        layout = layout_file.load(layout_path)
        casadm = casadm_mod.Casadm()
        state = prep.survey(casadm, layout)
        if state.refusals:
            raise RuntimeError('host layout of %s refused: %s' % (
                stack.name, '; '.join(state.refusals)))
        applied = []
        for action in state.actions:
            action.run(casadm)
            applied.append(str(action))
        prep.write_conf(layout)
        left = prep.survey(casadm, layout)
        if left.actions or left.refusals:
            raise RuntimeError('%s still differs from its layout: %s' % (
                stack.name, '; '.join(map(str, left.actions)) or
                '; '.join(left.refusals)))
        return applied

    @contextlib.contextmanager
    def stack(self, stack: data.Stack, args: argparse.Namespace
              ) -> Iterator[Device]:
        if stack.kind == 'krbd':
            with self.krbd(args) as path:
                yield Device(stack, path)
        elif stack.kind == 'cas':
            wipe(self.target.cache_dev)
            try:
                applied = self.start_cas(stack)
                props, path = self.attach(self.new_image(args), stack.mode)
                try:
                    yield CasDevice(stack, path, applied,
                                    self.target.cache_id)
                finally:
                    self.detach(props, path)   # flushes dirty data first
            finally:
                subprocess.run(['casadm', '-T', '-i',
                                str(self.target.cache_id)],
                               capture_output=True, timeout=300)
        elif stack.kind == 'bcache':
            with self.krbd(args) as origin, self.bcache(stack, origin) as dev:
                yield dev
        else:
            with self.krbd(args) as origin, self.dm(stack, origin) as dev:
                yield dev

    @contextlib.contextmanager
    def bcache(self, stack: data.Stack, origin: str) -> Iterator[Device]:
        cache_dev = self.target.cache_dev
        wipe(cache_dev)
        # 64 KiB buckets: about 1000 on the 64 MiB cache. make-bcache
        # takes 128 or more, but the kernel's cache_alloc refuses a cache
        # of 512 or fewer ("ca->sb.nbuckets is too small": it sizes its
        # free lists at nbuckets rounded up to a power of two / 1024)
        run('make-bcache', '--wipe-bcache', '--bucket', '64k', '-C',
            cache_dev, '-B', origin)
        try:
            for device in (cache_dev, origin):
                with contextlib.suppress(OSError):
                    # udev's bcache rule may have registered it already
                    write_sysfs('/sys/fs/bcache/register', device)
            backing = '/sys/block/%s/bcache' % os.path.basename(
                os.path.realpath(origin))
            with kernel_log_on_failure():
                wait_for('bcache device on %s' % origin,
                         lambda: os.path.exists(backing + '/dev'), 60)
                name = os.path.basename(os.path.realpath(backing + '/dev'))
                sysfs = '/sys/block/%s/bcache' % name
                wait_for('bcache attached', lambda: os.path.exists(
                    sysfs + '/cache'), 60)
            write_sysfs(sysfs + '/cache_mode', 'writeback'
                        if stack.write_back else 'writethrough')
            # bytes: since 5.x the kernel takes a plain number here
            # (sysfs_strtoul_clamp), though it prints "4.0M"
            write_sysfs(sysfs + '/sequential_cutoff',
                        str(data.SEQ_CUTOFF_KIB * 1024))
            run('udevadm', 'settle', '-t', '30')
            yield BcacheDevice(stack, '/dev/' + name, sysfs)
        finally:
            remove_bcache([cache_dev, origin])

    @contextlib.contextmanager
    def dm(self, stack: data.Stack, origin: str) -> Iterator[Device]:
        size = sectors(origin)
        cache_dev, metadata_dev = (self.target.cache_dev,
                                   self.target.metadata_dev)
        device: Device
        if stack.kind == 'dmcache':
            wipe(metadata_dev)
            table = ('0 %d cache %s %s %s 64 1 %s smq 0' % (
                size, metadata_dev, cache_dev, origin,
                'writeback' if stack.write_back else 'writethrough'))
        else:
            table = '0 %d writecache s %s %s 4096 0' % (
                size, origin, cache_dev)
        wipe(cache_dev)
        run('dmsetup', 'create', DM_NAME, '--table', table)
        try:
            path = '/dev/mapper/' + DM_NAME
            run('udevadm', 'settle', '-t', '30')
            device = (DmCacheDevice(stack, path, table)
                      if stack.kind == 'dmcache'
                      else WritecacheDevice(stack, path))
            yield device
        finally:
            # dirty blocks left (a drain timed out) stay on the cache
            # device, wiped before the next stack: throwaway images
            run('dmsetup', 'remove', '--retry', DM_NAME)


@contextlib.contextmanager
def kernel_log_on_failure() -> Iterator[None]:
    """Add the kernel log's last lines and bcache's sysfs to a failure."""
    try:
        yield
    except RuntimeError as error:
        log = subprocess.run(['dmesg'], capture_output=True, text=True,
                             timeout=30).stdout.splitlines()[-15:]
        raise RuntimeError('%s; bcache in sysfs: %s; kernel log:\n%s' % (
            error, bcache_left() or 'nothing', '\n'.join(log))) from error


def bcache_left() -> list[str]:
    return glob.glob('/sys/block/bcache*') + glob.glob('/sys/fs/bcache/*-*')


def remove_bcache(devices: list[str]) -> None:
    """Stop every bcache device and cache set, wipe their superblocks.

    udev's bcache rule registers a device again on the change event its
    close sends while the superblock is still there: wipe, settle, check.
    """
    for _attempt in range(3):
        for path in (glob.glob('/sys/block/bcache*/bcache/stop') +
                     glob.glob('/sys/fs/bcache/*-*/unregister')):
            with contextlib.suppress(OSError):   # going already
                write_sysfs(path, '1')
        wait_for('bcache to let go', lambda: not bcache_left(), 60)
        for device in devices:
            wipe(device)
        run('udevadm', 'settle', '-t', '30')
        if not bcache_left():
            return
    raise RuntimeError('bcache left behind: %s' % bcache_left())


# -- the cases --------------------------------------------------------------

class DirtySampler(threading.Thread):
    """Samples a device's dirty data twice a second while a case runs."""

    def __init__(self, device: Device, started: float):
        super().__init__(daemon=True)
        self.device = device
        self.started = started
        self.samples: list[tuple[float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            self.sample()

    def sample(self) -> None:
        try:
            dirty = self.device.dirty_bytes()
        except (RuntimeError, OSError, ValueError):
            return
        if dirty is not None:
            self.samples.append((time.monotonic() - self.started, dirty))


def proc_stat() -> str:
    with open('/proc/stat') as stat:
        return stat.read()


def run_case(device: Device, case: data.Case, args: argparse.Namespace,
             started: float) -> dict[str, Any]:
    if case.cleaning:
        device.set_cleaning(case.cleaning == 'start')
    span = args.image_mb if case.span == 'image' else args.range_mb
    # a bcache device is its backing device less bcache's data offset
    span = min(span, sectors(device.path) * 512 // 2 ** 20)
    sampler = DirtySampler(device, started) if case.sample_dirty else None
    counters = device.read_counters()
    cpu_before = proc_stat()
    if sampler:
        sampler.sample()
        sampler.start()
    try:
        out = run(*data.fio_argv(case, device.path, args.runtime, span))
    finally:
        if sampler:
            sampler.done.set()
            sampler.join()
    cpu_after = proc_stat()
    result = dict(data.parse_fio(out), stack=device.stack.name,
                  case=case.name)
    result['cpu_us_per_io'] = data.cpu_us_per_io(
        cpu_before, cpu_after, result['ios'], os.sysconf('SC_CLK_TCK'))
    device.settle_counters()
    after = device.read_counters()
    # (bcache counts writes as hits too: a read ratio of reads only)
    if counters is not None and after is not None and 'read' in case.rw:
        result['read_hit_ratio'] = data.hit_ratio(
            after[0] - counters[0], after[1] - counters[1])
    if sampler:
        sampler.sample()
        result['dirty'] = sampler.samples
    return result


def run_stack(bed: Bed, stack: data.Stack, args: argparse.Namespace,
              emit: Callable[[str], None], entry: dict[str, Any]) -> None:
    """Run *stack*'s cases into *entry* (kept if a later case fails)."""
    started = time.monotonic()
    entry.update(stack=stack.name, kind=stack.kind, mode=stack.mode,
                 cleaning=stack.cleaning, layout=dict(stack.layout),
                 cases=[], drain={})
    with bed.stack(stack, args) as device:
        if isinstance(device, CasDevice):
            entry['applied'] = device.applied
            for line in device.applied:
                emit('%-14s %s' % (stack.name, line))
            # what the product's attach gave the core (host layout)
            with contextlib.suppress(RuntimeError):
                entry['core_seq_cutoff'] = run(
                    'casadm', '-G', '-n', 'seq-cutoff', '-i',
                    str(device.bench.cache_id), '-j',
                    str(device.bench.core_id), '-o', 'csv').strip()
                emit('%-14s core seq-cutoff: %s' % (
                    stack.name, entry['core_seq_cutoff'].replace('\n', '; ')))
        for case in data.cases_for(stack):
            row = run_case(device, case, args, started)
            entry['cases'].append(row)
            emit(format_row(row))
        if stack.write_back:
            dirty = device.dirty_bytes()
            try:
                seconds = device.drain()
            except RuntimeError as exc:   # timed out: figures kept
                entry['drain'] = {'dirty_bytes': dirty, 'seconds': None,
                                  'timeout': DRAIN_TIMEOUT_S,
                                  'error': str(exc)}
                emit('%-14s drain: %s bytes dirty, %s' % (
                    stack.name, dirty, exc))
            else:
                entry['drain'] = {'dirty_bytes': dirty, 'seconds': seconds}
                emit('%-14s drain: %s bytes dirty, %.1f s' % (
                    stack.name, dirty, seconds or 0))
    entry['seconds'] = time.monotonic() - started


def format_row(row: dict[str, Any]) -> str:
    parts = ['%-14s %-24s' % (row['stack'], row['case'])]
    for name in ('read', 'write'):
        if row.get(name):
            item = row[name]
            parts.append('%s avg %.0f us p99 %s us %.0f IOPS' % (
                name, item['avg_us'], '%.0f' % item['p99_us']
                if item['p99_us'] is not None else '-', item['iops']))
    if row.get('cpu_us_per_io') is not None:
        parts.append('cpu %.0f us/IO' % row['cpu_us_per_io'])
    if row.get('read_hit_ratio') is not None:
        parts.append('hit %.0f%%' % (100 * row['read_hit_ratio']))
    if row.get('dirty'):
        parts.append('dirty max %.1f MiB' % (
            max(value for _, value in row['dirty']) / 2 ** 20))
    return '  '.join(parts)


# -- prerequisites, the run -----------------------------------------------

def check_prerequisites(target: Target, wiped: list[str]) -> list[str]:
    """What is missing or unsafe; nothing is changed but modules loaded.

    Modules that cannot load, tools not on PATH, the two devices; on an
    operator's host also: each device free (no mount, holder or Open CAS
    instance: an exclusive open succeeds) and named in ``--wipe``, no
    bcache device (the run stops every one it finds), the instance id
    unused and the pool reachable as the client.
    """
    missing = []
    for module in MODULES + (GUEST_MODULES if target.in_guest else ()):
        if os.path.isdir('/sys/module/' + module):
            continue
        done = subprocess.run(['modprobe', module], capture_output=True,
                              text=True)
        if done.returncode:
            missing.append('module %s: %s' % (module, done.stderr.strip()))
    missing += ['tool %s not on PATH' % tool for tool in TOOLS
                if not shutil.which(tool)]
    devices = (target.cache_dev, target.metadata_dev)
    for device in devices:
        if not os.path.exists(device):
            missing.append('block device %s missing' % device)
        elif not stat.S_ISBLK(os.stat(device).st_mode):
            missing.append('%s is not a block device' % device)
        elif not target.in_guest:
            missing += device_in_use(device)
            if device not in wiped:
                missing.append('%s is wiped by the run: name it in --wipe '
                               'to agree' % device)
    if target.in_guest:
        return missing
    if os.path.realpath(devices[0]) == os.path.realpath(devices[1]):
        missing.append('--cache-device and --metadata-device are the same')
    present = bcache_left()
    missing += ['bcache present (%s): the run stops every bcache device; '
                'run it on a host without bcache' % ', '.join(present)
                ] if present else []
    missing += ['device-mapper device %s exists' % DM_NAME
                ] if glob.glob('/dev/mapper/' + DM_NAME) else []
    if shutil.which('casadm'):
        listed = subprocess.run(['casadm', '-L', '-o', 'csv'],
                                capture_output=True, text=True)
        try:
            running = casadm_output.parse_list(listed.stdout)
        except exception.CasError:
            running = []
            missing.append('casadm -L answered %r: is Open CAS loaded?' %
                           (listed.stdout + listed.stderr)[:200])
        if target.cache_id in [cache.cache_id for cache in running]:
            missing.append('Open CAS instance %d runs here: choose a free '
                           '--cache-id' % target.cache_id)
    if not os.path.exists(target.ceph_conf):
        missing.append('Ceph configuration %s missing' % target.ceph_conf)
    elif shutil.which('rbd'):
        done = subprocess.run(['rbd', '-c', target.ceph_conf, '--id',
                               str(target.rbd_user), 'ls', target.pool],
                              capture_output=True, text=True, timeout=120)
        if done.returncode:
            missing.append('pool %s not usable as client.%s: %s' % (
                target.pool, target.rbd_user, done.stderr.strip()[-300:]))
    return missing


def device_in_use(device: str) -> list[str]:
    """Why *device* is in use (mounted, held, open by Open CAS), or []."""
    try:
        handle = os.open(device, os.O_RDONLY | os.O_EXCL)
    except OSError as exc:
        return ['%s is in use (%s): the run wipes it; give a partition '
                'nothing uses' % (device, exc.strerror)]
    os.close(handle)
    return []


QUICK = {'runtime': 3, 'range_mb': 8, 'image_mb': 80,
         'cas_variant': [], 'drain_timeout': 60}


def target_of(args: argparse.Namespace) -> Target:
    """The guest's defaults, or the operator's host from the options."""
    in_guest = os.environ.get('OS_BRICK_CAS_KERNEL_GUEST') == '1'
    if in_guest and not args.cache_device:
        return Target(ceph_conf=os.environ.get(
            'OS_BRICK_CAS_KERNEL_CEPH_CONF', ''))
    needed = [option for option, value in (
        ('--cache-device', args.cache_device),
        ('--metadata-device', args.metadata_device),
        ('--pool', args.pool), ('--rbd-user', args.rbd_user))
        if not value]
    if needed:
        raise SystemExit('outside the real-kernel guest (tools/run-kernel-'
                         'tests.sh --bench-peers) the run measures this host '
                         'and needs %s' % ', '.join(needed))
    return Target(cache_dev=args.cache_device,
                  metadata_dev=args.metadata_device,
                  cache_id=args.cache_id or HOST_CACHE_ID,
                  ceph_conf=args.ceph_conf, pool=args.pool,
                  rbd_user=args.rbd_user,
                  opencas_conf=os.path.join(
                      tempfile.mkdtemp(prefix='os-brick-cas-peers-conf-'),
                      'opencas.conf'))


def sizes(args: argparse.Namespace, cache_mib: Optional[int]) -> None:
    """Fill the options left out: the guest's, or from the cache's size."""
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
    range_mb, image_mb = 16, 128      # the guest's 64 MiB brd cache
    if cache_mib and cache_mib > 64:
        # a quarter of the cache is the fixed range; images twice it
        range_mb, image_mb = cache_mib // 4, cache_mib * 2
    for name, value in (('runtime', 10), ('range_mb', range_mb),
                        ('image_mb', image_mb),
                        ('cas_variant', list(data.DEFAULT_VARIANTS)),
                        ('drain_timeout', 300)):
        if getattr(args, name) is None:
            setattr(args, name, value)


def run_guest(args: argparse.Namespace) -> int:
    target = target_of(args)
    cache_mib = (sectors(target.cache_dev) * 512 // 2 ** 20
                 if os.path.exists(target.cache_dev) else None)
    sizes(args, cache_mib)
    global DRAIN_TIMEOUT_S
    DRAIN_TIMEOUT_S = args.drain_timeout
    stack_list = data.stacks([data.parse_variant(text)
                              for text in args.cas_variant])
    if args.stacks:
        stack_list = [s for s in stack_list if s.name in args.stacks]
    results_dir = args.results or os.environ.get(
        'OS_BRICK_CAS_KERNEL_RESULTS')
    report, emit = kernel_bench.drain_bench.start_report()
    emit('os-brick-cas peer benchmark -- %s; kernel %s' % (
        target.label, os.uname().release))
    emit('cache %s (%s MiB) for every stack; dm-cache metadata %s; fixed '
         'range %d MiB, image %d MiB, fio %d s per timed case' % (
             target.cache_dev, cache_mib, target.metadata_dev,
             args.range_mb, args.image_mb, args.runtime))
    emit('plan:')
    for line in data.plan(stack_list):
        emit('  ' + line)
    missing = check_prerequisites(target, args.wipe or [])
    for line in missing:
        emit('MISSING ' + line)
    if args.dry_run:
        emit('dry run: %s' % ('prerequisites missing' if missing else
                              'prerequisites present, no IO done'))
        save(results_dir, {'where': target.label, 'dry_run': True,
                           'missing': missing}, report)
        return 1 if missing else 0
    if missing:
        return 1
    if target.in_guest:
        if not target.ceph_conf:
            print('the guest gives no Ceph: run it with tools/run-kernel-'
                  'tests.sh --bench-peers', file=sys.stderr)
            return 2
        from tests.kernel import base as kernel_base   # guest's checkout
        port = kernel_base.mon_port()
    else:
        port = ''
    bed = Bed(target, port, tempfile.mkdtemp(prefix='os-brick-cas-peers-'))
    os.makedirs(os.path.dirname(target.opencas_conf), exist_ok=True)
    document: dict[str, Any] = {
        'where': target.label, 'kernel': os.uname().release,
        'opencas': os.environ.get('OS_BRICK_CAS_OPENCAS_VERSION') or
        opencas_version(),
        'cache_mib': cache_mib, 'range_mb': args.range_mb,
        'image_mb': args.image_mb, 'runtime_s': args.runtime,
        'seq_cutoff_kib': data.SEQ_CUTOFF_KIB, 'stacks': [], 'failed': []}
    rc = 0
    for stack in stack_list:
        entry: dict[str, Any] = {}
        document['stacks'].append(entry)
        try:
            run_stack(bed, stack, args, emit, entry)
        except Exception as exc:   # recorded: the other stacks still run
            rc = 1
            emit('%s FAILED: %s' % (stack.name, exc))
            entry['error'] = str(exc)
            document['failed'].append({'stack': stack.name,
                                       'error': str(exc)})
        save(results_dir, document, report)
    leftovers = left_behind(target)
    if leftovers:
        rc = 1
        emit('LEFT BEHIND: %s' % ', '.join(leftovers))
    document['left_behind'] = leftovers
    save(results_dir, document, report)
    if results_dir and not target.in_guest:
        emit(plot_into(results_dir))
    return rc


def opencas_version() -> Optional[str]:
    with contextlib.suppress(RuntimeError, OSError):
        return kernel_bench.opencas_version()
    return None


def plot_into(results_dir: str) -> str:
    """Draw peers.png beside peers.json; what was done, as a line."""
    json_path = os.path.join(results_dir, 'peers.json')
    try:
        run_plot(argparse.Namespace(json=json_path, directory=results_dir))
    except ImportError:
        return ('no plot: matplotlib is not installed here (pip install '
                'matplotlib, then python benchmarks/peers.py plot %s %s)' % (
                    json_path, results_dir))
    return 'plot: %s' % os.path.join(results_dir, 'peers.png')


def left_behind(target: Target) -> list[str]:
    """Stacks still present after the run (there must be none)."""
    found = bcache_left()
    found += glob.glob('/dev/mapper/' + DM_NAME)
    found += glob.glob('/dev/cas%d-*' % target.cache_id)
    return found


def save(results_dir: Optional[str], document: dict[str, Any],
         report: list[str]) -> None:
    """peers.json and peers.txt so far (kept if a later stack fails)."""
    kernel_bench.save(results_dir, document, report, name='peers')


# -- the plot (on the host, with matplotlib) -------------------------------

def run_plot(args: argparse.Namespace) -> int:
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot
    with open(args.json) as source:
        document = json.load(source)
    stack_names = [item['stack'] for item in document['stacks']]
    case_names = [case.name for case in data.CASES if case.name != 'warm-up']
    figure, (lat_axis, dirty_axis) = pyplot.subplots(
        2, 1, figsize=(13, 10))
    width = 0.8 / max(len(stack_names), 1)
    # one colour per stack (the default cycle repeats after ten)
    palette = matplotlib.colormaps['tab20']
    for index, item in enumerate(document['stacks']):
        colour = palette(index % palette.N)
        by_case = {row['case']: row for row in item.get('cases', [])}
        values = []
        for name in case_names:
            row = by_case.get(name, {})
            direction = row.get('read') or row.get('write')
            values.append(direction['avg_us'] if direction else 0)
        lat_axis.bar([x + index * width for x in range(len(case_names))],
                     values, width, label=item['stack'], color=colour)
        samples = [sample for row in item.get('cases', [])
                   for sample in row.get('dirty') or []]
        if samples:
            dirty_axis.plot([s[0] for s in samples],
                            [s[1] / 2 ** 20 for s in samples], '.-',
                            label=item['stack'], color=colour)
    lat_axis.set_xticks([x + 0.4 for x in range(len(case_names))])
    lat_axis.set_xticklabels(case_names, rotation=25, ha='right',
                             fontsize=8)
    lat_axis.set_yscale('log')
    lat_axis.set_ylabel('average latency, us (log)')
    lat_axis.legend(fontsize=7, ncol=3)
    lat_axis.set_title('\n'.join(textwrap.wrap('peers, kernel %s: %s' % (
        document.get('kernel', ''), document.get('where', '')), 130)),
        fontsize=9)
    dirty_axis.set_xlabel('seconds since the stack was set up')
    dirty_axis.set_ylabel('dirty data, MiB')
    dirty_axis.legend(fontsize=7)
    figure.tight_layout()
    os.makedirs(args.directory, exist_ok=True)
    figure.savefig(os.path.join(args.directory, 'peers.png'), dpi=90)
    write_summary(document, args.directory)
    return 0


def write_summary(document: dict[str, Any], directory: str) -> str:
    """DIR/peers-summary.rst: the summary table (README, tuning guide)."""
    path = os.path.join(directory, 'peers-summary.rst')
    with open(path, 'w') as out:
        out.write(data.summary_table(document) + '\n')
    return path


def main(argv: list[str]) -> int:
    parser, guest = kernel_bench.command_line(
        __doc__, 'peers.json/peers.txt', run_guest, run_plot,
        'draw peers.png and write peers-summary.rst (on the host)')
    guest.add_argument('--dry-run', action='store_true',
                       help='check prerequisites, print the plan, no IO')
    guest.add_argument('--quick', action='store_true',
                       help='short development profile: %s' % QUICK)
    guest.add_argument('--runtime', type=int,
                       help='fio seconds per timed case (default 10)')
    guest.add_argument('--range-mb', type=int,
                       help='the fixed range, fits the cache (default 16)')
    guest.add_argument('--image-mb', type=int,
                       help='each image, larger than the cache (default '
                            '128; the brd cache is 64 MiB)')
    guest.add_argument('--cas-variant', action='append',
                       help='an Open CAS stack besides the product\'s '
                            'defaults, NAME=MODE[:KEY=VALUE,...], e.g. '
                            'cas-wb-64k=wb:line_size_kib=64 or cas-wb-fast='
                            'wb:cleaning.wake_up_s=1; repeatable (default '
                            '%s)' % ' '.join(data.DEFAULT_VARIANTS))
    guest.add_argument('--drain-timeout', type=int,
                       help='seconds to wait for a cache to clean itself '
                            'after its cases (default 300)')
    guest.add_argument('--stacks', type=lambda text: text.split(','),
                       help='only these stacks (names as in the plan)')
    host = guest.add_argument_group(
        'on an operator\'s host (outside the real-kernel guest; as root, '
        'no instance using the devices; the run WIPES both devices)')
    host.add_argument('--cache-device',
                      help='the SSD partition every stack caches on')
    host.add_argument('--metadata-device',
                      help='a small partition for dm-cache\'s metadata')
    host.add_argument('--wipe', type=lambda text: text.split(','),
                      help='both devices again, comma-separated: the '
                           'agreement that they are wiped')
    host.add_argument('--ceph-conf', default='/etc/ceph/ceph.conf',
                      help='the cluster (monitors, keyring)')
    host.add_argument('--pool', help='a pool for the throwaway images')
    host.add_argument('--rbd-user', help='the Ceph client, e.g. cinder')
    host.add_argument('--cache-id', type=int,
                      help='an Open CAS instance id no instance uses '
                           '(default %d)' % HOST_CACHE_ID)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
