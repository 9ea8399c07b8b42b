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

"""Devices still open at detach: the exported core and the krbd device."""

import os
import subprocess

from os_brick_cas import exception
from tests.ceph import blockio
from tests.kernel import base

HAND_LINK = '/dev/disk/by-id/rbd-a-handmade'


class OpenCoreTestCase(base.KernelTestCase):
    """-R is refused while /dev/casX-Y is open; the refusal flushed."""

    caches = {2: 'wb'}

    def _dirty_wb(self, label):
        image = self.image(label)
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        digest = self.write(info['path'], 0, blockio.pattern(label,
                                                             base.MIB))
        [core] = self.cores()
        self.assertEqual(256, self.dirty(core))
        return image, props, info, digest

    def _hold(self, path, seconds):
        with open(path, 'rb') as device:
            holder = subprocess.Popen(['sleep', str(seconds)], stdin=device)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        return holder

    def test_detach_waits_out_a_short_opener(self):
        # what udev's probe does right after a guest closes the disk
        image, props, info, digest = self._dirty_wb('short-open')
        self._hold(info['path'], 3)

        self.connector.disconnect_volume(props, info)

        self.assertEqual(digest, self.in_ceph(image, 0, base.MIB))
        self.assert_clean_host()

    def test_detach_refused_while_the_disk_stays_open(self):
        image, props, info, digest = self._dirty_wb('held-open')
        holder = self._hold(info['path'], 600)

        exc = self.assertRaises(exception.DeviceBusy,
                                self.connector.disconnect_volume, props,
                                info)

        self.assertIn('Device opens or mount are pending', str(exc))
        [core] = self.cores()
        self.assertEqual('Active', core.status)
        self.assertEqual(1, len(self.mapped_devices()))
        # the product flushed before -R, and the refused -R flushed too
        self.assertEqual(0, self.dirty(core))
        self.assertEqual(digest, self.in_ceph(image, 0, base.MIB))
        record = self.cas('--remove-core', '--cache-id', '2', '--core-id',
                          str(core.core_id), golden='remove-core-open')
        self.assertEqual(1, record.returncode)
        holder.kill()
        holder.wait()

        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()


class KrbdBusyTestCase(base.KernelTestCase):
    """krbd refuses to unmap a device a core holds (EBUSY)."""

    caches = {1: 'wt'}

    def test_detach_names_the_core_that_blocks_the_unmap(self):
        image = self.image('held')
        mapped = base.run('rbd', 'map', '%s/%s' % (base.POOL, image))
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
        # udev probes the new /dev/cas1-1 too: -R may need a retry
        self.wait_for(lambda: self.cas('-R', '-i', '1', '-j', str(
            core.core_id)).returncode == 0, what='casadm -R')
        self.assertEqual(0, base.run('rbd', 'unmap', device).returncode)
