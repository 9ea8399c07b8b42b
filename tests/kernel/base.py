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

"""Real-kernel tier: the host library on real krbd and real Open CAS.

These tests run only inside the guest tools/run-kernel-tests.sh boots
(Debian's kernel under qemu, the Open CAS module built from a release
tarball, a one-node Ceph on the guest's loopback, systemd-udevd with the
product's rule and Open CAS's own udev loader). Nothing below the product
is a stand-in: casadm, cas_cache.ko, krbd, udev, casctl and Ceph are real.
Privsep entry points run in-process (client mode off, as in the
functional tier). Cache devices are brd RAM disks (/dev/ramN, which casadm
accepts without a by-id link): cache instance N runs on /dev/ram(N-1).

Outside the guest every test skips; inside it a missing piece fails.
"""

import os
import re
import subprocess
import time
from typing import Any, Optional
import uuid

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools


from os_brick_cas import connector
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from tests.ceph import blockio
from tests import privsep_fixture
from tests import real_ceph

GUEST = os.environ.get('OS_BRICK_CAS_KERNEL_GUEST') == '1'
RESULTS = os.environ.get('OS_BRICK_CAS_KERNEL_RESULTS', '')
CEPH_CONF = os.environ.get('OS_BRICK_CAS_KERNEL_CEPH_CONF', '')
#: the file in which tools/kernel/guest.sh's Ceph start leaves its exit
#: status: the cluster starts beside this process's imports
CEPH_STARTED = os.environ.get('OS_BRICK_CAS_KERNEL_CEPH_STARTED', '')
CEPH_START_TIMEOUT = 900
_ceph_usable = False
POOL = real_ceph.POOL
OPENCAS_CONF = '/etc/opencas/opencas.conf'
BY_ID = '/dev/disk/by-id'
MIB = 2 ** 20


def run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a tool of the guest; never raises on a non-zero exit."""
    return subprocess.run(list(argv), capture_output=True, text=True,
                          timeout=timeout)


def record(name: str, done: subprocess.CompletedProcess) -> None:
    """Keep casadm's exact output as a golden sample (results/golden/).

    Same format as ../shared/docs/casadm-samples: argv, exit code, stdout,
    stderr; tools/run-kernel-tests.sh copies them to
    tests/data/real-casadm/<release>/ with OS_BRICK_CAS_KERNEL_RECORD=1.
    """
    if not RESULTS:
        return
    directory = os.path.join(RESULTS, 'golden')
    os.makedirs(directory, exist_ok=True)
    argv = ['casadm' if os.path.basename(done.args[0]) == 'casadm'
            else done.args[0]] + list(done.args[1:])
    with open(os.path.join(directory, name + '.txt'), 'w') as sample:
        sample.write('$ %s\n--- exit code: %d\n--- stdout:\n%s--- stderr:\n%s'
                     % (' '.join(argv), done.returncode, done.stdout,
                        done.stderr))


def block_map(got: bytes, expected: bytes) -> str:
    """One character per 4 KiB block: '=' as expected, '0' zeros, 'x'."""
    marks = []
    for start in range(0, len(expected), 4096):
        block = got[start:start + 4096]
        marks.append('=' if block == expected[start:start + 4096] else
                     '0' if not block.strip(b'\0') else 'x')
    return ''.join(marks)


def wait_for_ceph() -> None:
    """Until the guest's Ceph cluster is usable (once per process).

    Raises if its start failed or did not end in CEPH_START_TIMEOUT
    seconds; the reason is in guest.log.
    """
    global _ceph_usable
    if _ceph_usable or not CEPH_STARTED:
        return
    deadline = time.monotonic() + CEPH_START_TIMEOUT
    while not os.path.exists(CEPH_STARTED):
        if time.monotonic() > deadline:
            raise RuntimeError('the guest\'s Ceph cluster did not start in '
                               '%d s (guest.log)' % CEPH_START_TIMEOUT)
        time.sleep(1)
    with open(CEPH_STARTED) as started:
        status = started.read().strip()
    if status != '0':
        raise RuntimeError('the guest\'s Ceph cluster did not start (exit '
                           'status %s; guest.log says why)' % status)
    _ceph_usable = True


def mon_port() -> str:
    with open(CEPH_CONF) as conf:
        return re.search(r'mon host = v1:127\.0\.0\.1:(\d+)',
                         conf.read()).group(1)


class KernelTestCase(testtools.TestCase):
    """Cache instances on brd, a clean host before and after each test."""

    #: cache id -> mode; instance N runs on /dev/ram(N-1)
    caches = {1: 'wt', 2: 'wb'}
    #: background cleaning of every instance ('nop': dirty stays dirty
    #: until a flush, so "not in Ceph yet" is deterministic)
    cleaning = 'nop'
    #: cache id -> cache line size in KiB (casadm -x); default 4
    line_size_kib: dict[int, int] = {}

    def setUp(self) -> None:
        super().setUp()
        if not GUEST:
            self.skipTest('runs only inside the real-kernel guest '
                          '(tools/run-kernel-tests.sh)')
        wait_for_ceph()
        self.useFixture(fixtures.Timeout(600, gentle=True))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        # registered first, so it runs last: the host is clean for the next
        self.addCleanup(self.reset_host)
        self.reset_host()
        for cache_id, mode in sorted(self.caches.items()):
            line = (['-x', str(self.line_size_kib[cache_id])]
                    if cache_id in self.line_size_kib else [])
            self.casadm_ok('-S', '-i', str(cache_id), '-d',
                           '/dev/ram%d' % (cache_id - 1), '-c', mode,
                           '--force', *line)
            self.casadm_ok('-X', '-n', 'cleaning', '-i', str(cache_id),
                           '-p', self.cleaning)
        self.write_opencas_conf()
        # sequential cut-off is per core and a new core starts with Open
        # CAS's default: the attach gives it the layout's "never" (the
        # product's own path), so no test write goes around the cache
        layout = os.path.join(self.tmp, 'host-layout.yaml')
        self.write_host_layout(layout)
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.conf.config(group=opts.GROUP, lock_path=self.tmp,
                         state_path=self.tmp, opencas_conf=OPENCAS_CONF,
                         flush_timeout=120, casadm_timeout=60,
                         host_layout=layout,
                         # v26.03's wb defect (README) is what some tests
                         # reproduce; test_known_defects checks the refusal
                         accepted_data_loss_defects=[
                             'ocf-hit-invalid-backfill'],
                         cache_instances={mode: str(cache_id) for
                                          cache_id, mode in
                                          self.caches.items()})
        self.useFixture(privsep_fixture.PrivsepInProcess())
        self.connector = connector.CachedRBDConnector(None,
                                                      do_local_attach=True)

    # -- the guest host ----------------------------------------------------
    def write_opencas_conf(self) -> None:
        """[caches] lists every instance, as a compute node's file would."""
        lines = ['version=19.3.0', '[caches]']
        lines += ['%d\t/dev/ram%d\t%s' % (cache_id, cache_id - 1,
                                          mode.upper())
                  for cache_id, mode in sorted(self.caches.items())]
        os.makedirs(os.path.dirname(OPENCAS_CONF), exist_ok=True)
        with open(OPENCAS_CONF, 'w') as conf_file:
            conf_file.write('\n'.join(lines + ['[cores]']) + '\n')

    def write_host_layout(self, path: str) -> None:
        """The instances of this test, sequential cut-off off."""
        with open(path, 'w') as layout_file:
            layout_file.write('instances:\n' + ''.join(
                '  - {id: %d, mode: %s, device: /dev/ram%d, '
                'seq_cutoff: {policy: never}}\n' % (
                    cache_id, mode, cache_id - 1)
                for cache_id, mode in sorted(self.caches.items())))

    def reset_host(self) -> None:
        """Stop every cache (no flush), unmap every image, drop images."""
        for cache in self.cache_list():
            run('casadm', '-T', '-i', str(cache.cache_id), '-n')
        listed = run('casadm', '-L', '-o', 'csv', '-b').stdout
        for line in listed.splitlines():
            fields = line.split(',')
            if fields[:2] == ['core', '-']:     # a core pool entry
                run('casadm', '--remove-detached', '-d', fields[2])
        for entry in sorted(os.listdir('/sys/bus/rbd/devices')):
            device = '/dev/rbd%s' % entry
            if run('rbd', 'unmap', device).returncode:
                run('rbd', 'unmap', '-o', 'force', device)
        run('udevadm', 'settle', '-t', '30')
        for name in os.listdir(BY_ID) if os.path.isdir(BY_ID) else []:
            if name.startswith('rbd-'):
                os.unlink(os.path.join(BY_ID, name))
        # librbd in this process: an `rbd ls` or `rbd rm` costs 4-8 s
        # under TCG (a process, its libraries, a monitor session)
        left = real_ceph.remove_every_image(CEPH_CONF)
        if left:
            print('reset_host: images still busy in Ceph: %s' % left)
        if os.path.exists(OPENCAS_CONF):
            os.unlink(OPENCAS_CONF)

    def cas(self, *args: str, golden: Optional[str] = None
            ) -> subprocess.CompletedProcess:
        done = run('casadm', *args)
        if golden:
            record(golden, done)
        return done

    def casadm_ok(self, *args: str, golden: Optional[str] = None) -> str:
        done = self.cas(*args, golden=golden)
        if done.returncode:
            self.fail('casadm %s failed (%d): %s%s' % (
                ' '.join(args), done.returncode, done.stdout, done.stderr))
        return done.stdout

    def cache_list(self) -> list[casadm_output.CacheInstance]:
        return casadm_output.parse_list(run('casadm', '-L', '-o', 'csv',
                                            '-b').stdout)

    def cores(self) -> list[casadm_output.Core]:
        return [core for cache in self.cache_list() for core in cache.cores]

    def dirty(self, core: casadm_output.Core,
              golden: Optional[str] = None) -> int:
        stats = casadm_output.parse_stats(self.casadm_ok(
            '-P', '-i', str(core.cache_id), '-j', str(core.core_id),
            '-o', 'csv', golden=golden))
        return int(float(stats[casadm_output.DIRTY_BLOCKS]))

    def mapped_devices(self) -> list[str]:
        return ['/dev/rbd%s' % entry
                for entry in sorted(os.listdir('/sys/bus/rbd/devices'))]

    def rbd_links(self) -> list[str]:
        return sorted(name for name in os.listdir(BY_ID)
                      if name.startswith('rbd-cas-'))

    def opencas_core_rows(self) -> str:
        with open(OPENCAS_CONF) as conf_file:
            return conf_file.read().split('[cores]\n', 1)[1].strip()

    def assert_clean_host(self) -> None:
        """No core, no mapping, no by-id link, no opencas.conf core row."""
        run('udevadm', 'settle', '-t', '30')
        self.assertEqual(([], [], [], ''),
                         (self.cores(), self.mapped_devices(),
                          self.rbd_links(), self.opencas_core_rows()))

    # -- Ceph ---------------------------------------------------------------
    def image(self, label: str, size_mb: int = 64) -> str:
        name = 'volume-%s-%s' % (label, uuid.uuid4().hex[:6])
        real_ceph.create_image(CEPH_CONF, name, size_mb * MIB)
        return name

    def props(self, image: str, mode: Optional[str] = 'wt',
              **extra: Any) -> dict[str, Any]:
        data = {'name': '%s/%s' % (POOL, image), 'hosts': ['127.0.0.1'],
                'ports': [mon_port()], 'auth_username': 'admin',
                'cluster_name': 'ceph', 'volume_id': image,
                'auth_enabled': False}
        if mode is not None:
            data.update(cacheable=True, cache_mode=mode)
        data.update(extra)
        return data

    @staticmethod
    def in_ceph(image: str, offset: int, length: int) -> str:
        """sha256 of what librbd reads from the cluster (not via krbd)."""
        return real_ceph.digest(CEPH_CONF, image, offset, length)

    def assert_ceph_holds(self, image: str, offset: int,
                          data: bytes) -> None:
        """librbd reads *data* at *offset*; else say which blocks differ."""
        differs = self.ceph_differs(image, offset, data)
        if differs:
            self.fail(differs)

    @staticmethod
    def ceph_differs(image: str, offset: int, data: bytes) -> Optional[str]:
        """None if librbd reads *data* at *offset*, else which blocks differ.

        The 4 KiB blocks are mapped (``=`` as written, ``0`` zeros, ``x``
        other) for a read at once and one 3 s later, so a failure tells a
        read racing the cluster from bytes that never reached it.
        """
        first = real_ceph.read(CEPH_CONF, image, offset, len(data))
        if first == data:
            return None
        time.sleep(3)
        later = real_ceph.read(CEPH_CONF, image, offset, len(data))
        return ('Ceph does not hold the %d bytes written at %d of %s:\n'
                '  at once: %s\n  3 s on: %s' % (
                    len(data), offset, image, block_map(first, data),
                    block_map(later, data)))

    # -- the guest's disk ------------------------------------------------
    @staticmethod
    def write(path: str, offset: int, data: bytes) -> str:
        """O_DIRECT write through *path*; the data's sha256."""
        blockio.write_direct(path, offset, data)
        return blockio.digest(data)

    @staticmethod
    def read(path: str, offset: int, length: int) -> str:
        return blockio.digest(blockio.read_direct(path, offset, length))
