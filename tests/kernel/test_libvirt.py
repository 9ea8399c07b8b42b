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

"""A real VM's disk on the real cache: real libvirtd and QEMU in the guest.

nova's own ``attach_volume`` / ``detach_volume`` (the product's
CachedRBDLibvirtDriver, in tests/kernel/nova_compute.py's process) hot-plug
the volume into a paused q35 TCG domain of a real libvirtd, with the real
connector on real krbd and Open CAS below. QEMU's ``qemu-io`` (HMP) stands
in for a guest kernel's IO. What this does not prove: a guest kernel's IO
and unplug acknowledgement, KVM, AppArmor/SELinux, QEMU as a non-root user.

Figures (attach, IO, detach seconds; libvirtd's start) go to
RESULTS/libvirt-figures.txt.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional
import uuid

import fixtures
from testtools import matchers

from os_brick_cas import casadm
from os_brick_cas.cmd import doctor as doctor_cmd
from os_brick_cas.cmd import status as status_cmd
from os_brick_cas import opts
from os_brick_cas import rbd_names
from os_brick_cas import report
from tests.kernel import base
from tests.kernel import libvirt_host
from tests.kernel import nova_compute

MIB = base.MIB
PATTERN, PATTERN_AT, PATTERN_LEN = 0x5a, 0, 2 * MIB
DISCARD_AT, DISCARD_LEN = 8 * MIB, 4 * MIB
MOUNTPOINT = '/dev/vdb'
TARGET = 'vdb'
_DAEMON: Optional[libvirt_host.Libvirtd] = None


def figure(name: str, seconds: float) -> None:
    """One measured figure, for README (RESULTS/libvirt-figures.txt)."""
    if base.RESULTS:
        with open(os.path.join(base.RESULTS, 'libvirt-figures.txt'),
                  'a') as figures:
            figures.write('%s %.2f\n' % (name, seconds))


def daemon() -> libvirt_host.Libvirtd:
    """The guest's libvirtd, started once per test process."""
    global _DAEMON
    if _DAEMON is None:
        results = base.RESULTS or tempfile.mkdtemp()
        started = libvirt_host.Libvirtd(
            os.path.join(results, 'libvirtd.log'),
            os.environ.get('OS_BRICK_CAS_KERNEL_LIBVIRT_CAPS') or None)
        started.start()
        figure('libvirtd-start%s' % ('-cached-caps' if started.caps_cached
                                     else ''), started.start_seconds)
        _DAEMON = started
    return _DAEMON


_NOVA: Optional['NovaCompute'] = None
#: lock_path, state_path and host layout of both processes
WORKDIR = tempfile.mkdtemp(prefix='libvirt-tier-')
INSTANCE_UUID = str(uuid.uuid4())


def tearDownModule() -> None:
    global _NOVA
    if _NOVA is not None:
        _NOVA.stop()
        _NOVA = None
    if _DAEMON is not None:
        _DAEMON.stop()


class NovaCompute:
    """tests/kernel/nova_compute.py in its own process (one per class)."""

    def __init__(self, log_path: str) -> None:
        """Start the process: it imports nova, then waits for start()."""
        self.spawned = time.monotonic()
        self.started = False
        log = open(log_path, 'a')
        checkout = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'tests.kernel.nova_compute'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            text=True, cwd=checkout)
        log.close()
        self.log_path = log_path

    def start(self, setup: dict[str, Any]) -> None:
        """The set-up line: nova's configuration, then init_host."""
        started = self._send(setup)
        if not started['ok']:
            raise RuntimeError('nova did not start: %s' % started)
        self.started = True
        figure('nova-imports', started['imports'])
        figure('nova-init-host', started['seconds'])
        figure('nova-ready-after-spawn', time.monotonic() - self.spawned)

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        self.process.stdin.write(json.dumps(request) + '\n')
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(nova_compute.PREFIX):
                return json.loads(line[len(nova_compute.PREFIX):])
        raise RuntimeError('nova_compute ended (%s); its log: %s' % (
            self.process.wait(), self.log_path))

    def call(self, op: str, connection_info: dict[str, Any]
             ) -> dict[str, Any]:
        return self._send({'op': op, 'connection_info': connection_info,
                           'mountpoint': MOUNTPOINT})

    def libvirt_options(self, options: dict[str, Any]) -> None:
        answer = self._send({'op': 'libvirt-options', 'options': options})
        if not answer['ok']:
            raise RuntimeError('nova refused %s: %s' % (options, answer))

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write('{"op": "exit"}\n')
                self.process.stdin.close()
                self.process.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


def _spawn_nova_compute() -> 'NovaCompute':
    return NovaCompute(os.path.join(base.RESULTS or WORKDIR,
                                    'nova-compute.log'))


if base.GUEST:
    # nova's imports take minutes under TCG (130 s of a CI run when they
    # waited for this module's first test): they start when the tier's
    # tests are loaded and run on the guest's other vCPU while the tests
    # of the modules before this one run; the process waits for its
    # set-up line, and exits at end of input if no test of ours runs
    _NOVA = _spawn_nova_compute()


class LibvirtTierBase(base.KernelTestCase):
    """A paused domain per test; one nova-compute process per module."""

    caches = {1: 'wt', 2: 'wb'}
    native_hotplug = True
    #: [libvirt] options of the nova process for this class's tests
    libvirt_options: dict[str, Any] = {'device_detach_timeout': 20,
                                       'device_detach_attempts': 8}
    instance_uuid = INSTANCE_UUID

    def setUp(self) -> None:
        global _NOVA
        super().setUp()
        # every wait below is bounded; this bounds the whole test too, so
        # a hung hypervisor cannot take the rest of the tier's time
        self.useFixture(fixtures.Timeout(900, gentle=True))
        if _NOVA is None:
            # after tearDownModule, or run outside the guest
            _NOVA = _spawn_nova_compute()
        daemon()
        # the nova process and this one share the host's state and layout
        layout = os.path.join(WORKDIR, 'host-layout.yaml')
        self.write_host_layout(layout)
        host_options = dict(
            lock_path=WORKDIR, state_path=WORKDIR,
            opencas_conf=base.OPENCAS_CONF, flush_timeout=120,
            casadm_timeout=60, host_layout=layout,
            accepted_data_loss_defects=['ocf-hit-invalid-backfill'],
            cache_instances={mode: str(cache_id) for cache_id, mode in
                             self.caches.items()})
        self.conf.config(group=opts.GROUP, **host_options)
        if not _NOVA.started:
            _NOVA.start({'os_brick_cas': host_options, 'lock_path': WORKDIR,
                         'instance_uuid': INSTANCE_UUID})
        self.nova = _NOVA
        self.nova.libvirt_options(self.libvirt_options)
        self.domain = libvirt_host.Domain(
            INSTANCE_UUID, native_hotplug=self.native_hotplug)
        self.domain.define_and_start(WORKDIR)
        # runs before reset_host (registered first): QEMU lets go first
        self.addCleanup(self.domain.remove)
        self.addCleanup(self.keep_domain_log)

    # -- helpers -------------------------------------------------------------
    def connection_info(self, image: str, mode: str) -> dict[str, Any]:
        return {'driver_volume_type': 'rbd', 'serial': image,
                'data': self.props(image, mode, discard=True)}

    def nova_call(self, op: str, info: dict[str, Any]) -> dict[str, Any]:
        answer = self.nova.call(op, info)
        figure('%s-%s' % (self._testMethodName, op), answer['seconds'])
        return answer

    def nova_ok(self, op: str, info: dict[str, Any]) -> dict[str, Any]:
        answer = self.nova_call(op, info)
        self.assertTrue(answer['ok'], 'nova %s failed: %s' % (
            op, answer.get('trace') or answer))
        return answer

    def qemu_io(self, command: str) -> str:
        started = time.monotonic()
        report_text = self.domain.qemu_io(TARGET, command)
        figure('qemu-io-%s' % command.split()[0],
               time.monotonic() - started)
        return report_text

    def qemu_write(self, value: int, offset: int, length: int) -> None:
        got = self.qemu_io('write -P 0x%x %d %d' % (value, offset, length))
        self.assertRegex(got, r'wrote %d/%d bytes at offset %d' % (
            length, length, offset))

    def qemu_read_back(self, value: int, offset: int, length: int) -> None:
        got = self.qemu_io('read -P 0x%x %d %d' % (value, offset, length))
        self.assertNotIn('Pattern verification failed', got)
        self.assertRegex(got, r'read %d/%d bytes at offset %d' % (
            length, length, offset))

    # Checks that do not depend on each other are expectations
    # (testtools' expectThat): a failed one is reported and the test goes
    # on, so one guest run with several behaviours broken on purpose shows
    # each of their checks failing.
    def expect_ceph_holds(self, image: str, offset: int, data: bytes,
                          why: str) -> None:
        self.expectThat(self.ceph_differs(image, offset, data),
                        matchers.Is(None), why)

    def expect_not_in_ceph(self, image: str, offset: int, data: bytes,
                           why: str) -> None:
        self.expectThat(self.in_ceph(image, offset, len(data)),
                        matchers.NotEquals(base.blockio.digest(data)), why)

    def expect_live_disk(self, exported: str) -> None:
        """The live XML is nova's block disk on /dev/casX-Y."""
        disk = self.domain.disk(TARGET)
        self.assertIsNotNone(disk, 'no %s in the live domain' % TARGET)
        driver = disk.find('driver')
        self.expectThat(
            (disk.get('type'), disk.find('source').get('dev'),
             driver.get('name'), driver.get('type'), driver.get('cache'),
             driver.get('io'), driver.get('discard'),
             disk.find('target').get('bus')),
            matchers.Equals(('block', exported, 'qemu', 'raw', 'none',
                             'native', 'unmap', 'virtio')),
            "the live domain XML is not nova's block disk "
            "(type, source dev, driver name, type, cache, io, discard, bus)")

    def expect_qemu_direct(self, exported: str) -> None:
        flags = self.domain.open_flags(exported)
        self.assertTrue(flags, 'QEMU does not hold %s' % exported)
        self.expectThat(['0%o' % flag for flag in flags
                         if not flag & libvirt_host.O_DIRECT],
                        matchers.Equals([]),
                        'QEMU holds %s without O_DIRECT (fdinfo flags)'
                        % exported)

    def core_of(self, image: str):
        """The one core on the host, which must be *image*'s."""
        [core] = self.cores()
        # casadm -b shows the by-id link the product named (escaped parts)
        spec = rbd_names.parse_link_name(os.path.basename(core.device))
        self.assertEqual(image, spec.image if spec else core.device)
        return core

    def keep_domain_log(self) -> None:
        """The domain's log (qemu-io's reports) into the results."""
        if base.RESULTS and os.path.exists(self.domain.log_path):
            shutil.copy(self.domain.log_path, os.path.join(
                base.RESULTS, '%s-qemu.log' % self._testMethodName))


class CachedDiskTestCase(LibvirtTierBase):
    """attach, IO through QEMU, detach: nova on real libvirt, krbd, CAS."""

    def _through_qemu(self, mode: str) -> tuple[str, Any]:
        image = self.image('libvirt-' + mode)
        info = self.connection_info(image, mode)
        self.nova_ok('attach', info)
        core = self.core_of(image)
        self.expectThat([cache.mode for cache in self.cache_list()
                         if cache.cache_id == core.cache_id],
                        matchers.Equals([mode]),
                        'the core is not in a %s cache instance' % mode)
        self.expect_live_disk(core.exported)
        self.expect_qemu_direct(core.exported)

        data = bytes([PATTERN]) * PATTERN_LEN
        self.qemu_write(PATTERN, PATTERN_AT, PATTERN_LEN)
        self.qemu_read_back(PATTERN, PATTERN_AT, PATTERN_LEN)
        if mode == 'wt':
            self.expect_ceph_holds(image, PATTERN_AT, data,
                                   'wt: not in Ceph at once')
        else:
            self.expectThat(self.dirty(core), matchers.Equals(
                PATTERN_LEN // 4096),
                'wb: the bytes written are not all dirty in the cache')
            self.expect_not_in_ceph(image, PATTERN_AT, data,
                                    'wb: in Ceph before the detach')
        return image, info, core

    def _detach(self, image: str, info: dict[str, Any], core: Any) -> None:
        answer = self.nova_ok('detach', info)
        # nova handed the volume to the product's disconnect only after
        # QEMU had let go of the exported device
        self.expectThat(answer['qemu_held_at_disconnect'],
                        matchers.Equals([[]]),
                        'QEMU still held /dev/cas* at the disconnect')
        self.expectThat(self.domain.disk(TARGET), matchers.Is(None),
                        'the disk is still in the live domain')
        self.expectThat(self.domain.open_flags(core.exported),
                        matchers.Equals([]), 'QEMU still holds the device')
        self.expect_ceph_holds(image, PATTERN_AT,
                               bytes([PATTERN]) * PATTERN_LEN,
                               'not in Ceph after the detach')
        self.assert_clean_host()

    def test_write_through_disk(self):
        image, info, core = self._through_qemu('wt')
        # a discard through QEMU reaches Ceph (written first, so a discard
        # that stops in the cache leaves the bytes there)
        self.qemu_write(0x33, DISCARD_AT, DISCARD_LEN)
        self.expect_ceph_holds(image, DISCARD_AT, bytes([0x33]) * DISCARD_LEN,
                               'wt: the bytes to discard are not in Ceph')
        got = self.qemu_io('discard %d %d' % (DISCARD_AT, DISCARD_LEN))
        self.expectThat(got, matchers.Contains(
            'discard %d/%d bytes at offset %d' % (
                DISCARD_LEN, DISCARD_LEN, DISCARD_AT)),
            "qemu-io's discard did not complete")
        self.expect_ceph_holds(image, DISCARD_AT, bytes(DISCARD_LEN),
                               'the discard through QEMU did not reach Ceph')
        self._detach(image, info, core)

    def test_write_back_disk(self):
        image, info, core = self._through_qemu('wb')
        self._detach(image, info, core)


class UnackedUnplugTestCase(LibvirtTierBase):
    """ACPI hot-plug (q35's default) and a guest that never answers."""

    native_hotplug = False
    libvirt_options = {'device_detach_timeout': 3,
                       'device_detach_attempts': 1}

    def test_detach_fails_and_the_dirty_core_stays(self):
        image = self.image('libvirt-unacked')
        info = self.connection_info(image, 'wb')
        self.nova_ok('attach', info)
        core = self.core_of(image)
        self.expect_live_disk(core.exported)
        self.expect_qemu_direct(core.exported)
        data = bytes([PATTERN]) * PATTERN_LEN
        self.qemu_write(PATTERN, PATTERN_AT, PATTERN_LEN)
        dirty = self.dirty(core)
        self.expectThat(dirty, matchers.Equals(PATTERN_LEN // 4096),
                        'wb: the bytes written are not all dirty in the cache')

        answer = self.nova_call('detach', info)

        # nova gives up waiting for the unplug and never disconnects
        self.expectThat((answer.get('error'), answer['disconnect_called']),
                        matchers.Equals(('DeviceDetachFailed', False)),
                        "nova's detach (error, disconnect called)")
        # QEMU still holds the core's device: the core, its mapping and
        # its dirty data all stay on this host, nothing reached Ceph
        self.expectThat(self.domain.open_flags(core.exported),
                        matchers.Not(matchers.Equals([])),
                        'QEMU no longer holds the device')
        self.expectThat(self.cores(), matchers.Equals([core]),
                        'the core did not stay as it was')
        self.expectThat(len(self.mapped_devices()), matchers.Equals(1),
                        'the mapping did not stay')
        self.expectThat(self.dirty(core), matchers.Equals(dirty),
                        'the dirty data did not stay in the cache')
        self.expect_not_in_ceph(image, PATTERN_AT, data,
                                'in Ceph although the core was not flushed')
        # the operator sees who holds it (os-brick-cas status)
        shown = status_cmd.render_table(report.host_report(casadm.Casadm()))
        self.expectThat(shown, matchers.Contains(
            'held open by qemu-system-x86 (pid %d) of instance %s'
            % (self.domain.qemu_pid(), self.instance_uuid)),
            'status does not name the holder')
        # and doctor, with what to do (report.holders, as status)
        told = [finding.message for finding in doctor_cmd.check_host(
            casadm.Casadm(), host='kernel-guest-compute')
            if finding.check == 'holders']
        holder = ('is held open by qemu-system-x86 (pid %d) of instance %s; '
                  'it cannot be removed' % (self.domain.qemu_pid(),
                                            self.instance_uuid))
        self.expectThat(told, matchers.MatchesListwise(
            [matchers.Contains(holder)]), 'doctor does not name the holder')

        # what the operator does: stop the server (QEMU exits, closing the
        # device), then nova's detach runs again and flushes on the way
        self.domain.destroy()
        self.nova_ok('detach', info)
        self.assert_ceph_holds(image, PATTERN_AT, data)
        self.assert_clean_host()

        # a later attach of the same volume works and sees the data
        self.domain.start()
        self.nova_ok('attach', info)
        core = self.core_of(image)
        self.expect_live_disk(core.exported)
        self.qemu_read_back(PATTERN, PATTERN_AT, PATTERN_LEN)
        self.domain.destroy()
        self.nova_ok('detach', info)
        self.assert_clean_host()
