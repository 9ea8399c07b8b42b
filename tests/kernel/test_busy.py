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

"""A detach while the exported core is open (the EBUSY unmap of a
device a core holds: tests/host_contract.py)."""

import subprocess

from os_brick_cas import exception
from tests.ceph import blockio
from tests.kernel import base


class OpenCoreTestCase(base.KernelTestCase):
    """-R is refused while /dev/casX-Y is open; the refusal flushed."""

    caches = {2: 'wb'}

    def _dirty_wb(self, label):
        image = self.image(label)
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        data = blockio.pattern(label, base.MIB)
        digest = self.write(info['path'], 0, data)
        [core] = self.cores()
        # every line dirty: the attach returned only after udev settled, so
        # no probe's read miss raced the write (OCF may pass such a write
        # through to Ceph: 240 of 256 once, before the attach settled)
        self.assertEqual(256, self.dirty(core))
        # the cache gives the bytes back: a later miss in Ceph is the flush's
        self.assertEqual(digest, self.read(info['path'], 0, base.MIB))
        return image, props, info, data

    def _hold(self, path, seconds):
        with open(path, 'rb') as device:
            holder = subprocess.Popen(['sleep', str(seconds)], stdin=device)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        return holder

    def test_detach_waits_out_a_short_opener(self):
        # what udev's probe does right after a guest closes the disk
        image, props, info, data = self._dirty_wb('short-open')
        self._hold(info['path'], 3)

        self.connector.disconnect_volume(props, info)

        self.assert_ceph_holds(image, 0, data)
        self.assert_clean_host()

    def test_detach_refused_while_the_disk_stays_open(self):
        image, props, info, data = self._dirty_wb('held-open')
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
        self.assert_ceph_holds(image, 0, data)
        record = self.cas('--remove-core', '--cache-id', '2', '--core-id',
                          str(core.core_id), golden='remove-core-open')
        self.assertEqual(1, record.returncode)
        holder.kill()
        holder.wait()

        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
