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

"""A drained write-back core cannot get dirty: bytes checked in Ceph.

Data-true stand-in over a real image: after drain, a guest write through
/dev/casX-Y is in Ceph at once (librbd read-back) and the core stays
clean; after undrain, writes are cached (dirty, not in Ceph) again.
"""

from os_brick_cas import casadm
from os_brick_cas import drain
from os_brick_cas.opencas import casadm_output
from tests.ceph import base
from tests.ceph import blockio
from tests.ceph import test_datapath

MIB = 2 ** 20


class DrainCephTestCase(base.CephTestCase):

    def test_drained_core_writes_straight_to_ceph(self):
        volume = self.create('wb')
        data, device = self.attach(volume)
        cache_id, core_id = casadm_output.core_of_exported(device['path'])
        before = blockio.pattern('before ' + volume.id, MIB)
        blockio.write_direct(device['path'], 0, before)
        self.assertEqual(256, self.dirty_blocks(device['path']))
        cas = casadm.Casadm()
        [cache] = [c for c in cas.list_caches() if c.cache_id == cache_id]
        [core] = [c for c in cache.cores if c.core_id == core_id]
        manager = drain.DrainManager(cas)
        manager.drain(cache, core, 60)
        # the flush wrote every acknowledged byte, and none can get dirty
        self.assertEqual(0, self.dirty_blocks(device['path']))
        self.assertEqual(blockio.digest(before),
                         self.ceph_digest(volume.name, 0, MIB))
        during = blockio.pattern('during ' + volume.id, MIB)
        blockio.write_direct(device['path'], 2 * MIB, during)
        self.assertEqual(0, self.dirty_blocks(device['path']))
        self.assertEqual(blockio.digest(during),
                         self.ceph_digest(volume.name, 2 * MIB, MIB))
        # undrain: write-back again
        manager.undrain(cache, core, core_id)
        after = blockio.pattern('after ' + volume.id, MIB)
        blockio.write_direct(device['path'], 4 * MIB, after)
        self.assertEqual(256, self.dirty_blocks(device['path']))
        self.assertEqual(test_datapath.ZEROS,
                         self.ceph_digest(volume.name, 4 * MIB, MIB))
        self.connector.disconnect_volume(data, device)
        self.assertEqual(blockio.digest(after),
                         self.ceph_digest(volume.name, 4 * MIB, MIB))
