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

"""The data-true Open CAS stand-in over a real Ceph image.

The exported object is a direct-I/O loop device over the stand-in's FUSE
file, whose cache engine keeps bytes in its own cache file until cleaned
to the core (the image mapped by rbd-fuse + loop). Every check reads the
bytes back through librbd. The stand-in is driven directly here (not yet
through casadm and the connector).
"""

import os

import fixtures

from os_brick_cas.simulator.datapath import engine
from os_brick_cas.simulator.datapath import standin
from os_brick_cas.simulator import rbd_ceph
from tests.ceph import base
from tests.ceph import blockio

MIB = 1024 * 1024


class DataTrueStandInTestCase(base.CephTestCase):

    def setUp(self) -> None:
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        rbd_ceph.set_conf(self.dir, self.cluster.conf)
        self.image = self.create('wb').name
        self.core = rbd_ceph.map_image(self.dir, base.POOL, self.image)
        self.addCleanup(rbd_ceph.unmap_image, self.dir, base.POOL,
                        self.image, self.core)
        self.cache_file = os.path.join(self.dir, 'ssd')
        self.mountpoint = os.path.join(self.dir, 'cas1-1')

    def start_standin(self, mode: str = 'wb', load: bool = False):
        exported = standin.start(self.cache_file, self.core, 1,
                                 self.mountpoint, mode=mode, lines=1024,
                                 load=load)
        self.addCleanup(self._stop_quietly, exported)
        return exported

    def _stop_quietly(self, exported) -> None:
        if os.path.ismount(exported.mountpoint):
            standin.stop(exported)

    def test_wb_data_reaches_ceph_only_when_cleaned(self):
        exported = self.start_standin('wb')
        payload = blockio.pattern('wb %s' % self.image, MIB)
        blockio.write_direct(exported.loop, 4 * MIB, payload)
        self.assertEqual(payload, blockio.read_direct(exported.loop,
                                                      4 * MIB, MIB))
        self.assertEqual(256, standin.stats(exported)['dirty'])
        self.assertNotEqual(payload, self.read_from_ceph(self.image,
                                                         4 * MIB, MIB))
        standin.control(exported, 'remove')
        standin.stop(exported)
        self.assertEqual(payload, self.read_from_ceph(self.image, 4 * MIB,
                                                      MIB))

    def test_wt_data_is_in_ceph_at_once(self):
        exported = self.start_standin('wt')
        payload = blockio.pattern('wt %s' % self.image, MIB)
        blockio.write_direct(exported.loop, 0, payload)
        self.assertEqual(payload, self.read_from_ceph(self.image, 0, MIB))
        self.assertEqual(0, standin.stats(exported)['dirty'])

    def test_reboot_with_dirty_lines_then_attach_cleans_to_ceph(self):
        exported = self.start_standin('wb')
        payload = blockio.pattern('reboot %s' % self.image, MIB)
        blockio.write_direct(exported.loop, 0, payload)
        standin.stop(exported)           # "reboot": no flush
        self.assertNotEqual(payload, self.read_from_ceph(self.image, 0,
                                                         MIB))
        again = self.start_standin(load=True)    # try-add re-attaches
        self.assertEqual(256, standin.stats(again)['dirty'])
        standin.control(again, 'flush')
        self.assertEqual(payload, self.read_from_ceph(self.image, 0, MIB))

    def test_destroyed_cache_file_in_wb_is_reported(self):
        exported = self.start_standin('wb')
        blockio.write_direct(exported.loop, 0, blockio.pattern('lost', MIB))
        standin.stop(exported)
        os.unlink(self.cache_file)       # the "SSD died"
        err = self.assertRaises(engine.CacheDeviceLost, self.start_standin,
                                load=True)
        self.assertEqual(256, err.dirty_lines)
        self.assertEqual(b'\0' * MIB, self.read_from_ceph(self.image, 0,
                                                          MIB))
