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

"""Per-mode data safety on real Ceph, through the real connector.

The Open CAS stand-in is data-true: /dev/casX-Y is a loop device over a
cache engine whose lines sit in its own cache file until cleaned to the
core (the image, mapped by rbd-fuse + loop). A skipped flush therefore
leaves librbd without the data, and these tests see it. Every check reads
the image back through librbd and compares sha256 digests.
"""

import ddt

from os_brick_cas import exception
from tests.ceph import base
from tests.ceph import blockio

MIB = 2 ** 20
ZEROS = blockio.digest(bytes(MIB))
#: modes whose writes reach the core before the write completes
WRITE_THROUGH = ('wt', 'wa', 'pt')


@ddt.ddt
class DataTrueCephTestCase(base.CephTestCase):

    @ddt.data('wt', 'wb', 'wa', 'wo', 'pt')
    def test_librbd_sees_writes_when_the_mode_says(self, mode):
        volume = self.create(mode)
        data, device = self.attach(volume)
        payload = blockio.pattern('%s %s' % (mode, volume.id), MIB)
        blockio.write_direct(device['path'], 4 * MIB, payload)
        self.assertEqual(blockio.digest(payload), blockio.digest(
            blockio.read_direct(device['path'], 4 * MIB, MIB)))
        before = self.ceph_digest(volume.name, 4 * MIB, MIB)
        if mode in WRITE_THROUGH:
            self.assertEqual(blockio.digest(payload), before)
            self.assertEqual(0, self.dirty_blocks(device['path']))
        else:
            # write-back/write-only: in the cache only, not yet in Ceph
            self.assertEqual(ZEROS, before)
            self.assertEqual(256, self.dirty_blocks(device['path']))
        self.connector.disconnect_volume(data, device)
        self.assertEqual(blockio.digest(payload),
                         self.ceph_digest(volume.name, 4 * MIB, MIB))

    def test_reboot_with_dirty_lines_then_attach_again_reaches_ceph(self):
        volume = self.create('wb')
        data, device = self.attach(volume)
        payload = blockio.pattern('reboot ' + volume.id, MIB)
        blockio.write_direct(device['path'], 0, payload)
        self.host.reboot()               # no flush: dirty lines stay
        self.assertEqual(ZEROS, self.ceph_digest(volume.name, 0, MIB))
        data, device = self.attach(volume)     # try-add re-activates
        self.assertEqual(256, self.dirty_blocks(device['path']))
        self.assertEqual(blockio.digest(payload), blockio.digest(
            blockio.read_direct(device['path'], 0, MIB)))
        self.assertEqual(ZEROS, self.ceph_digest(volume.name, 0, MIB))
        self.connector.disconnect_volume(data, device)
        self.assertEqual(blockio.digest(payload),
                         self.ceph_digest(volume.name, 0, MIB))

    def test_destroyed_cache_file_in_wb_is_detected_and_reported(self):
        volume = self.create('wb')
        data, device = self.attach(volume)
        blockio.write_direct(device['path'], 0, blockio.pattern('lost', MIB))
        self.host.reboot(lost_cache_devices=(2,))    # the "SSD died"
        # Open CAS cannot load the instance and says what was lost
        [message] = self.host.state()['boot_log']
        self.assertIn('Failed to load cache 2', message)
        self.assertIn('256 dirty line(s) never reached the core', message)
        # the product refuses to attach the volume without its cache (its
        # opencas.conf row names an instance that is not running: no
        # fallback can attach it over stale Ceph data) ...
        exc = self.assertRaises(exception.CachedDataMayBeNewer, self.attach,
                                volume)
        self.assertIn('cache instance 2, which is not running', str(exc))
        # ... and the documented loss is real: Ceph never got the data
        self.assertEqual(ZEROS, self.ceph_digest(volume.name, 0, MIB))
