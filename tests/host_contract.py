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

"""One contract, two hosts: scenarios both the stand-in and the guest run.

Each mixin below is a scenario of the host library, written once. It runs
against the real kernel (tests/kernel/test_contract.py: real casadm,
cas_cache.ko, krbd, udev) and against the stand-in (tests/ceph/
test_contract.py: the simulator's casadm and rbd over the same kind of
one-node Ceph, its data-true cache engine), so the stand-in cannot drift
from the real stack without one of the two runs failing.

A tier's base class provides the host (its ``caches`` attribute starts
one instance per entry) and these hooks:

``image(label)``            a new image in the pool, its name
``props(image, mode)``      connection properties for it
``in_ceph(image, off, n)``  sha256 of what librbd reads from the cluster
``cores()`` / ``dirty(core, golden=None)`` / ``cache_list()``
                            the host's casadm -L / -P, parsed
``cas(*argv, golden=None)`` / ``casadm_ok(*argv, golden=None)``
                            casadm itself (golden: keep the output where
                            the tier records real samples)
``mapped_devices()``        the mapped krbd devices
``assert_clean_host()``     no core, mapping, by-id link or core row
``load_after_crash(cache_id, device)``
                            load a stopped instance as the host's boot does
``assert_unmap_never_forced()``
                            no ``rbd unmap -o force`` was run, where the
                            host can tell (the stand-in logs its calls; on
                            the kernel the kept mapping shows it)
"""

import os
import subprocess
import threading
import time
from typing import Any, Callable

from os_brick_cas import exception
from tests.ceph import blockio

MIB = 2 ** 20
#: modes whose writes reach Ceph before the write completes
SYNCHRONOUS = ('wt', 'wa', 'pt')
HAND_LINK = '/dev/disk/by-id/rbd-a-handmade'
CHUNK = 64 * 1024


def write(path: str, offset: int, data: bytes) -> str:
    """O_DIRECT write through *path*, as a guest's disk; the sha256."""
    blockio.write_direct(path, offset, data)
    return blockio.digest(data)


def read(path: str, offset: int, length: int) -> str:
    return blockio.digest(blockio.read_direct(path, offset, length))


def wait_for(predicate: Callable[[], bool], timeout: float = 30,
             what: str = '') -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(0.2)


class EveryModeContract(object):
    """Attach, idempotent attach, write, detach in every cache mode."""

    caches = {1: 'wt', 2: 'wb', 3: 'wa', 4: 'wo', 5: 'pt'}

    def test_attach_write_detach_in_every_mode(self) -> None:
        for cache_id, mode in sorted(self.caches.items()):
            image = self.image(mode)
            props = self.props(image, mode)
            data = blockio.pattern('%s-%s' % (mode, image), MIB)

            info = self.connector.connect_volume(props)
            again = self.connector.connect_volume(props)

            self.assertEqual('/dev/cas%d-1' % cache_id, info['path'], mode)
            self.assertEqual(info['path'], again['path'], mode)
            [core] = self.cores()
            self.assertEqual((cache_id, 'Active', info['path']),
                             (core.cache_id, core.status, core.exported))
            digest = write(info['path'], 4 * MIB, data)
            before = self.in_ceph(image, 4 * MIB, MIB)
            if mode in SYNCHRONOUS:
                self.assertEqual(digest, before, mode)
                self.assertEqual(0, self.dirty(core), mode)
            else:
                self.assertNotEqual(digest, before, mode)
                self.assertEqual(256, self.dirty(
                    core, golden='stats-core-csv-%s-dirty' % mode), mode)
                self.assertIn('\t%s\t' % core.device,
                              self.opencas_core_rows())
            self.assertEqual(digest, read(info['path'], 4 * MIB, MIB))

            self.connector.disconnect_volume(props, info)

            self.assertEqual(digest, self.in_ceph(image, 4 * MIB, MIB),
                             mode)
            self.assert_clean_host()


class BusyUnmapContract(object):
    """krbd refuses to unmap a device a core holds (EBUSY)."""

    caches = {1: 'wt'}

    def test_detach_names_the_core_that_blocks_the_unmap(self) -> None:
        image = self.image('held')
        mapped = subprocess.run(['rbd', 'map', '%s/%s' % (self.pool,
                                                          image)],
                                capture_output=True, text=True)
        self.assertEqual(0, mapped.returncode, mapped.stderr)
        device = mapped.stdout.strip()
        os.symlink(device, HAND_LINK)
        self.addCleanup(lambda: os.path.lexists(HAND_LINK) and
                        os.unlink(HAND_LINK))
        self.casadm_ok('-A', '-i', '1', '-d', HAND_LINK,
                       golden='add-core-hand-link')
        [core] = self.cores()

        exc = self.assertRaises(exception.DeviceHeldByCore,
                                self.connector.disconnect_volume,
                                self.props(image, 'wt'), None)

        self.assertIn('Open CAS core %d of cache instance 1' % core.core_id,
                      str(exc))
        self.assertIn('(16) Device or resource busy', str(exc))
        self.assertEqual([device], self.mapped_devices())
        self.assertEqual(['Active'], [c.status for c in self.cores()])
        self.assert_unmap_never_forced()
        # udev probes the new /dev/cas1-1 too: -R may need a retry
        wait_for(lambda: self.cas('-R', '-i', '1', '-j', str(
            core.core_id)).returncode == 0, what='casadm -R')
        self.assertEqual(0, subprocess.run(['rbd', 'unmap', device],
                                           capture_output=True).returncode)


class CrashReloadContract(object):
    """A wb instance stopped without flush and loaded again ("reboot").

    ``casadm -T -n`` stops it as a crash leaves it, the krbd device goes
    (no mapping survives a reboot), the tier's boot path loads it with
    ``-S -l``: the core is Inactive with its dirty data, which is not in
    Ceph. Attaching the volume re-activates that core (try-add); the detach
    flushes the data to Ceph.
    """

    caches = {2: 'wb'}

    def test_dirty_core_survives_a_crash_and_is_reactivated(self) -> None:
        image = self.image('reboot')
        props = self.props(image, 'wb')
        data = blockio.pattern('reboot-' + image, MIB)
        info = self.connector.connect_volume(props)
        digest = write(info['path'], 0, data)
        [cache] = self.cache_list()
        [core] = cache.cores

        # udev probes /dev/cas2-1 after the writer closed it: -T may need
        # a retry ("Device opens or mount are pending")
        wait_for(lambda: self.cas('-T', '-i', '2', '-n',
                                  golden='stop-cache-no-flush'
                                  ).returncode == 0, what='casadm -T -n')
        for device in self.mapped_devices():
            self.assertEqual(0, subprocess.run(
                ['rbd', 'unmap', device], capture_output=True).returncode)
        self.load_after_crash(2, cache.device)

        self.casadm_ok('-L', '-o', 'csv', '-b', golden='list-csv-b-inactive')
        [cache] = self.cache_list()
        [inactive] = cache.cores
        self.assertEqual(('Incomplete', 'Inactive', core.core_id),
                         (cache.status, inactive.status, inactive.core_id))
        self.assertEqual(256, self.dirty(inactive,
                                         golden='stats-core-csv-inactive'))
        self.assertNotEqual(digest, self.in_ceph(image, 0, MIB))
        flushed = self.cas('-F', '-i', '2', golden='flush-cache-incomplete')
        self.assertEqual(1, flushed.returncode)
        # os-brick-cas does not drain on an Incomplete instance
        self.assertIn('Incomplete', self.connector.drain_blocker(props))

        again = self.connector.connect_volume(props)

        self.assertEqual(info['path'], again['path'])
        [cache] = self.cache_list()
        [active] = cache.cores
        self.assertEqual(('Running', 'Active'), (cache.status,
                                                 active.status))
        self.assertEqual(256, self.dirty(active))
        self.assertEqual(digest, read(again['path'], 0, MIB))
        self.assertNotEqual(digest, self.in_ceph(image, 0, MIB))

        self.connector.disconnect_volume(props, again)

        self.assertEqual(digest, self.in_ceph(image, 0, MIB))
        self.assert_clean_host()


class DrainContract(object):
    """Drain and undrain through the life cycle, with writes meanwhile."""

    caches = {2: 'wb'}

    @staticmethod
    def _writer(path: str, stop: threading.Event,
                written: dict[int, bytes]) -> None:
        """Rewrite the second MiB chunk by chunk until *stop* is set."""
        round_ = 0
        while not stop.is_set():
            for index in range(MIB // CHUNK):
                data = blockio.pattern('round %d chunk %d' % (round_, index),
                                       CHUNK)
                blockio.write_direct(path, MIB + index * CHUNK, data)
                written[index] = data
            round_ += 1

    def _lifecycle(self, transition: str, props: dict[str, Any]) -> Any:
        """Drain or undrain through the life cycle (no Cinder markers)."""
        from os_brick_cas import lifecycle
        from os_brick_cas import volume as volume_mod
        spec = volume_mod.from_connection_properties(props).spec
        machine = lifecycle.Lifecycle(self.connector.volume_cache.casadm)
        return getattr(machine, transition)(
            lifecycle.volume_of(spec),
            lifecycle.Cinder('contract-host', None, in_use=False),
            lifecycle.deadline(120))

    def test_drain_with_writes_then_undrain(self) -> None:
        image = self.image('drain')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        path = info['path']
        first = write(path, 0, blockio.pattern('first', MIB))
        [core] = self.cores()
        self.assertEqual(256, self.dirty(core))

        stop, written = threading.Event(), {}
        writer = threading.Thread(target=self._writer,
                                  args=(path, stop, written))
        writer.start()
        try:
            self.assertGreaterEqual(self._lifecycle(
                'drain', props).dirty_before, 256)
        finally:
            stop.set()
            writer.join()

        # every acknowledged write is in Ceph and none is dirty any more
        self.assertTrue(self.connector.is_drained(props))
        self.assertEqual(0, self.dirty(core,
                                       golden='stats-core-csv-drained'))
        self.assertEqual(first, self.in_ceph(image, 0, MIB))
        self.assertEqual(blockio.digest(b''.join(
            written[i] for i in range(MIB // CHUNK))),
            self.in_ceph(image, MIB, MIB))
        self.casadm_ok('--io-class', '--list', '--cache-id', '2',
                       '--output-format', 'csv',
                       golden='io-class-list-drained')
        # drained: a new write goes straight to Ceph
        during = write(path, 4 * MIB, blockio.pattern('drained', MIB))
        self.assertEqual(0, self.dirty(core))
        self.assertEqual(during, self.in_ceph(image, 4 * MIB, MIB))

        self.assertTrue(self._lifecycle('undrain', props))

        self.assertFalse(self.connector.is_drained(props))
        after = write(path, 6 * MIB, blockio.pattern('undrained', MIB))
        self.assertEqual(256, self.dirty(core))
        self.assertNotEqual(after, self.in_ceph(image, 6 * MIB, MIB))
        self.connector.disconnect_volume(props, info)
        self.assertEqual(after, self.in_ceph(image, 6 * MIB, MIB))
        self.assert_clean_host()
