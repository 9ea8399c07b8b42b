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

"""Drain cost of a write-back core, on a real RBD image (stand-in cache).

Prints, for one wb core of the data-true Open CAS stand-in (FUSE + loop
cache engine) over a real image of a one-node loopback Ceph cluster
(rbd-fuse + loop):

* drain time (``DrainManager.drain``: IO-class load + bounded flush,
  through the real Casadm class) against the number of dirty 4 KiB blocks
  made by writing through /dev/casX-Y;
* latency of N O_DIRECT 4 KiB random writes (QD1) to that core while it
  caches (undrained, writes stay dirty in the cache) and while it is
  drained (writes go straight to Ceph).

Every figure is a userspace stand-in over loopback Ceph, not a hardware
figure. Run as root on a machine with the Ceph tools
(tools/install-ceph.sh); it starts its own cluster unless given one::

    .venv/bin/python benchmarks/drain.py [--dirty 0,256,1024,4096,16384]
        [--writes 1000] [--cold] [--ceph-conf /path/to/ceph.conf]
        [--output FILE]
"""

import argparse
import contextlib
import mmap
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Optional
import uuid

from oslo_config import cfg

from cas_standin import ceph_cluster
from cas_standin import fixture
from os_brick_cas import casadm
from os_brick_cas.cmd import commands as cas_cmd
from os_brick_cas import connector as cas_connector
from os_brick_cas import drain
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts

CONF = cfg.CONF
POOL = 'volumes'
BLOCK = 4096
CACHE_ID = 9
LABEL = 'userspace stand-in over loopback Ceph, not a hardware figure'
#: the latency writes land in this many blocks (16 MiB) from the start
LATENCY_SPAN = 4096


def figure(kind: str, **values: Any) -> str:
    """One labelled figure line: ``kind key=value ... -- LABEL``."""
    return '%s %s -- %s' % (kind, ' '.join(
        '%s=%s' % item for item in values.items()), LABEL)


def write_blocks(path: str, blocks: list[int], chunk_blocks: int = 1,
                 fill: bytes = b'd') -> list[float]:
    """O_DIRECT writes at *blocks* (4 KiB indexes); µs of each write.

    With *chunk_blocks* > 1, runs of consecutive blocks are written
    *chunk_blocks* at a time (faster dirtying; latencies then per chunk).
    """
    buffer = mmap.mmap(-1, chunk_blocks * BLOCK)    # page aligned
    buffer.write(fill * len(buffer))
    latencies = []
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    try:
        index = 0
        while index < len(blocks):
            run = 1
            while (run < chunk_blocks and index + run < len(blocks) and
                   blocks[index + run] == blocks[index] + run):
                run += 1
            view = memoryview(buffer)[:run * BLOCK]
            start = time.perf_counter()
            written = os.pwrite(fd, view, blocks[index] * BLOCK)
            latencies.append((time.perf_counter() - start) * 1e6)
            view.release()
            if written != run * BLOCK:
                raise OSError('short write at block %d' % blocks[index])
            index += run
    finally:
        os.close(fd)
        buffer.close()
    return latencies


def percentile(values: list[float], pct: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method='inclusive')[pct - 1]


class Bench(object):
    """One cached wb core on a real image, and its drain manager."""

    def __init__(self, device: str, timeout: int):
        self.device = device
        self.timeout = timeout
        self.casadm = casadm.Casadm()
        self.manager = drain.DrainManager(self.casadm)
        found = casadm_output.core_of_exported(device)
        if found is None:
            raise RuntimeError('%s is not a cached device' % device)
        self.cache_id, self.core_id = found

    def _cache_and_core(self) -> tuple[casadm_output.CacheInstance,
                                       casadm_output.Core]:
        [cache] = [c for c in self.casadm.list_caches()
                   if c.cache_id == self.cache_id]
        [core] = [c for c in cache.cores if c.core_id == self.core_id]
        return cache, core

    def dirty(self) -> int:
        return self.casadm.dirty_blocks(self._cache_and_core()[1])

    def drain(self) -> float:
        cache, core = self._cache_and_core()
        start = time.perf_counter()
        self.manager.drain(cache, core, self.timeout)
        return time.perf_counter() - start

    def undrain(self) -> None:
        cache, core = self._cache_and_core()
        self.manager.undrain(cache, core, core.core_id)

    def drain_row(self, blocks: int) -> str:
        """Dirty *blocks* blocks through the device, then time a drain."""
        self.undrain()
        if blocks:
            write_blocks(self.device, list(range(blocks)), chunk_blocks=256)
        dirty_before = self.dirty()
        seconds = self.drain()
        left = self.dirty()
        return figure('drain', written=blocks, dirty_before=dirty_before,
                      flushed=dirty_before - left, dirty_after=left,
                      seconds='%.3f' % seconds,
                      blocks_per_s='%.0f' % (
                          (dirty_before - left) / seconds))

    def warm(self, blocks: int) -> None:
        """Map the first *blocks* blocks in the cache, clean."""
        self.undrain()
        write_blocks(self.device, list(range(blocks)), chunk_blocks=256)
        self.drain()

    def latency_row(self, state: str, writes: int, seed: int) -> str:
        """*writes* random 4 KiB O_DIRECT writes, cached or drained."""
        if state == 'cached':
            self.undrain()
        else:
            self.drain()
        blocks = random.Random(seed).sample(range(LATENCY_SPAN), writes)
        latencies = write_blocks(self.device, blocks,
                                 fill=state[0].encode())
        return figure('write4k', core=state, writes=len(latencies),
                      p50_us='%.1f' % percentile(latencies, 50),
                      p99_us='%.1f' % percentile(latencies, 99),
                      avg_us='%.1f' % statistics.fmean(latencies),
                      max_us='%.1f' % max(latencies),
                      dirty_after=self.dirty())


def configure(workdir: str, host: fixture.SimulatedHost,
              flush_timeout: int) -> None:
    conf_path = os.path.join(workdir, 'opencas.conf')
    with open(conf_path, 'w') as conf_file:
        conf_file.write('version=19.3.0\n[caches]\n%d\t'
                        '/dev/disk/by-id/nvme-sim-part%d\tWB\n[cores]\n'
                        % (CACHE_ID, CACHE_ID))
    host.set_opencas_conf(conf_path)
    for name, value in (('cache_instances', {'wb': str(CACHE_ID)}),
                        ('opencas_conf', conf_path),
                        ('lock_path', workdir), ('state_path', workdir),
                        ('sysfs_rbd_root', host.sysfs_root),
                        ('flush_timeout', flush_timeout)):
        CONF.set_override(name, value, group=opts.GROUP)


def props(image: str, mode: Optional[str] = 'wb', port: str = '6789'
          ) -> dict[str, Any]:
    """Connection properties of *image*; *mode* None: not cacheable."""
    data = {'name': '%s/%s' % (POOL, image), 'hosts': ['127.0.0.1'],
            'ports': [port], 'auth_username': 'admin',
            'cluster_name': 'ceph', 'volume_id': image,
            'auth_enabled': False}
    if mode is not None:
        data.update(cacheable=True, cache_mode=mode)
    return data


def measure(args: argparse.Namespace, ceph_conf: str, workdir: str,
            stack: contextlib.ExitStack,
            emit: Callable[[str], None]) -> None:
    lines = max(args.dirty + [args.writes, LATENCY_SPAN]) + 1024
    host = fixture.SimulatedHost(caches={CACHE_ID: 'wb'},
                                 udev_by_id=True, datapath_lines=lines)
    host.setUp()
    stack.callback(host.cleanUp)
    host.use_ceph(ceph_conf)
    configure(workdir, host, args.flush_timeout)
    image = 'volume-drain-bench-%s' % uuid.uuid4().hex[:8]
    size_mb = max(64, (max(args.dirty) * BLOCK) // 2 ** 20 + 16)
    rbd = ceph_cluster.real_rbd()
    ceph_cluster.run(rbd, '-c', ceph_conf, 'create', '%s/%s' % (POOL, image),
                     '--size', '%dM' % size_mb)
    stack.callback(ceph_cluster.remove_image, ceph_conf,
                   '%s/%s' % (POOL, image))
    connector = cas_connector.CachedRBDConnector(None)
    volume = props(image)
    device = connector.connect_volume(volume)
    stack.callback(connector.disconnect_volume, volume, device)
    bench = Bench(device['path'], args.flush_timeout)
    emit('os-brick-cas drain benchmark: %s = image %s/%s (%d MiB) behind wb '
         'cache instance %d of %d 4 KiB lines; %s' % (
             device['path'], POOL, image, size_mb, CACHE_ID, lines, LABEL))
    emit('# drain = DrainManager.drain (IO-class load + flush of the core) '
         'after writing N contiguous dirty 4 KiB blocks through the device')
    for blocks in args.dirty:
        emit(bench.drain_row(blocks))
    if args.cold:
        where = ('cache lines mapped only where the drain rows above wrote '
                 '(--cold)')
    else:
        bench.warm(LATENCY_SPAN)
        where = ('every line of the range already in the cache, clean '
                 '(written and drained first)')
    emit('# write4k = %d random O_DIRECT 4 KiB writes at QD1 in the first %d '
         'MiB, latency of each pwrite(); %s' % (
             args.writes, LATENCY_SPAN * BLOCK // 2 ** 20, where))
    emit(bench.latency_row('cached', args.writes, seed=1))
    emit(bench.latency_row('drained', args.writes, seed=2))
    bench.undrain()
    bench.drain()       # nothing dirty left behind for the detach


def parse_sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(',') if part.strip()]
    if not sizes or min(sizes) < 0:
        raise argparse.ArgumentTypeError('comma-separated counts >= 0')
    return sizes


def start_report() -> tuple[list[str], Callable[[str], None]]:
    """Configure the CLI in-process (root) and return (lines, emit)."""
    report: list[str] = []

    def emit(line: str) -> None:
        report.append(line)
        print(line, flush=True)

    CONF([], project='os-brick-cas')
    cas_cmd.run_privileged_in_process_as_root()
    return report, emit


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dirty', type=parse_sizes,
                        default=[0, 256, 1024, 4096, 16384],
                        help='dirty 4 KiB block counts to drain '
                             '(default 0,256,1024,4096,16384)')
    parser.add_argument('--writes', type=int, default=1000,
                        help='4 KiB writes per latency run (default 1000)')
    parser.add_argument('--ceph-conf',
                        help="an existing cluster's ceph.conf (pool %s); "
                             'default: start a loopback cluster' % POOL)
    parser.add_argument('--cold', action='store_true',
                        help='do not map the latency range in the cache '
                             'first (cached writes then allocate lines)')
    parser.add_argument('--flush-timeout', type=int, default=120)
    parser.add_argument('--output', help='also write the report here')
    args = parser.parse_args(argv)
    if not 2 <= args.writes <= LATENCY_SPAN:
        parser.error('--writes must be 2..%d' % LATENCY_SPAN)
    if os.geteuid() != 0:
        print('run as root: loop devices, FUSE and /dev entries',
              file=sys.stderr)
        return 2
    missing = ceph_cluster.missing_tools()
    if missing:
        print('Ceph tools missing: %s (tools/install-ceph.sh installs '
              'them)' % ', '.join(missing), file=sys.stderr)
        return 2
    report, emit = start_report()
    workdir = tempfile.mkdtemp(prefix='os-brick-cas-drain-bench-')
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        ceph_conf: Optional[str] = args.ceph_conf
        if ceph_conf is None:
            cluster = ceph_cluster.CephCluster(pool=POOL)
            cluster.setUp()
            stack.callback(cluster.cleanUp)
            ceph_conf = cluster.conf
        measure(args, ceph_conf, workdir, stack, emit)
    if args.output:
        with open(args.output, 'w') as output:
            output.write('\n'.join(report) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
