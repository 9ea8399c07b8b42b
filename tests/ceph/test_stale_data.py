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

"""Stale cached data never reaches the image nor a guest (real Ceph).

On the data-true stand-in, over a real image: a host's old cached bytes
(``old``) and newer bytes another host wrote to Ceph meanwhile (``new``,
written through librbd). Every check reads back through librbd or the
exported device and compares sha256 digests.
"""

from os_brick_cas import exception
from tests.ceph import base
from tests.ceph import blockio

MIB = 2 ** 20
EPOCH_A = 'a0a0a0a0-0000-4000-8000-00000000000a'
EPOCH_B = 'b0b0b0b0-0000-4000-8000-00000000000b'


class StaleDataTestCase(base.CephTestCase):

    def attach_as(self, volume, epoch: str, owner: str):
        info = self.initialize_connection(volume)
        props = dict(info['data'], cas_epoch=epoch, cas_owner_epoch=owner)
        return props, self.connector.connect_volume(props)

    def write_elsewhere(self, image: str, payload: bytes) -> None:
        """Another host's guest writes through librbd (Ceph only)."""
        import rados
        import rbd
        with rados.Rados(conffile=self.cluster.conf) as cluster, \
                cluster.open_ioctx(base.POOL) as ioctx, \
                rbd.Image(ioctx, image) as img:
            img.write(payload, 0)
            img.flush()

    def test_returning_host_never_flushes_its_stale_blocks(self):
        volume = self.create('wb')
        props, device = self.attach_as(volume, EPOCH_A, '')
        old = blockio.pattern('old ' + volume.id, MIB)
        blockio.write_direct(device['path'], 0, old)
        self.host.reboot()                 # the dirty lines stay cached
        new = blockio.pattern('new ' + volume.id, MIB)
        self.write_elsewhere(volume.name, new)
        # Cinder's marker now names another host: '' here
        props['cas_owner_epoch'] = ''
        self.assertRaises(exception.NotDataOwner,
                          self.connector.disconnect_volume, props, None)
        self.assertRaises(exception.NotDataOwner, self.attach_as, volume,
                          EPOCH_B, '')
        self.assertEqual(blockio.digest(new),
                         self.ceph_digest(volume.name, 0, MIB))

    def test_new_attachment_reads_ceph_not_old_clean_lines(self):
        volume = self.create('wt')
        props, device = self.attach_as(volume, EPOCH_A, '')
        old = blockio.pattern('old ' + volume.id, MIB)
        blockio.write_direct(device['path'], 0, old)
        self.assertEqual(blockio.digest(old), blockio.digest(
            blockio.read_direct(device['path'], 0, MIB)))
        self.host.reboot()                 # clean lines stay cached
        new = blockio.pattern('new ' + volume.id, MIB)
        self.write_elsewhere(volume.name, new)
        props, device = self.attach_as(volume, EPOCH_B, '')
        self.assertEqual(blockio.digest(new), blockio.digest(
            blockio.read_direct(device['path'], 0, MIB)))
        self.connector.disconnect_volume(props, device)
        self.assertEqual(blockio.digest(new),
                         self.ceph_digest(volume.name, 0, MIB))
