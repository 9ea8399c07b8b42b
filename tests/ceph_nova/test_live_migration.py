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

"""nova live-migrates a write-back volume; the bytes checked in real Ceph.

nova's functional compute manager drives two computes, each on its own
simulated host whose Open CAS stand-in is data-true and whose ``rbd map``
maps the real image (rbd-fuse + loop) of a one-node cluster: the guest's
writes go through /dev/casX-Y with O_DIRECT and are read back with librbd.
"""

import os
import subprocess

import fixtures
from lxml import etree


from os_brick_cas.opencas import casadm_output
from tests.ceph import blockio
from tests.nova.functional import test_lifecycle
from tests import real_ceph as cluster

MIB = cluster.MIB
WB_VOL = test_lifecycle.WB_VOL
IMAGE = 'volume-' + WB_VOL
ZEROS = blockio.digest(bytes(MIB))
#: where the guest writes: A before, B during the migration, C after it
A_AT, B_AT, C_AT = 0, 2 * MIB, 4 * MIB


class CephLiveMigrationTestCase(test_lifecycle.TwoComputesTestBase):

    volumes = {WB_VOL: 'wb'}
    datapath_lines = 4096       # 16 MiB cache per instance

    def setUp(self):
        cluster.skip_or_fail(self)
        self.ceph_conf = cluster.shared_cluster().conf
        cluster.create_image(self.ceph_conf, IMAGE, 16 * MIB)
        self.addCleanup(cluster.remove_image, self.ceph_conf, IMAGE)
        # runs after the hosts' own cleanup: nothing of theirs is left
        self.addCleanup(self.assert_nothing_left)
        super().setUp()
        self.flags(flush_timeout=30, group='os_brick_cas')

    def create_images(self, host) -> None:
        """The image is in the cluster already (one Ceph, two hosts)."""

    # -- what a test reads on a host and in Ceph -----------------------------
    def ceph_digest(self, offset: int) -> str:
        return cluster.digest(self.ceph_conf, IMAGE, offset, MIB)

    def dirty_blocks(self, compute: str, core: casadm_output.Core) -> int:
        """Dirty 4 KiB blocks of *core* as *compute*'s casadm reports."""
        return int(casadm_output.parse_stats(self._tool(
            compute, 'casadm', '-P', '-i', str(core.cache_id), '-j',
            str(core.core_id), '-o', 'csv'))[casadm_output.DIRTY_BLOCKS])

    def assert_nothing_left(self) -> None:
        """No loop device, FUSE mount or /dev/cas* of either host left."""
        roots = [host.state_dir for host in getattr(self, 'hosts',
                                                    {}).values()]
        loops = subprocess.run(['losetup', '-a'], capture_output=True,
                               text=True).stdout
        with open('/proc/mounts') as mounts:
            mounted = mounts.read()
        left = [line for line in loops.splitlines() + mounted.splitlines()
                if any(root in line for root in roots)]
        self.assertEqual([], left)
        self.assertEqual([], [name for name in os.listdir('/dev')
                              if name.startswith('cas')])

    def test_write_back_volume_moves_with_every_acknowledged_byte(self):
        self._attach_volume(self.server, WB_VOL)
        [source_core] = self.cores('compute1')
        source_dev = source_core.exported
        a = blockio.pattern('A before the migration', MIB)
        b = blockio.pattern('B during the migration', MIB)
        c = blockio.pattern('C on the destination', MIB)
        # the guest writes A: cached on compute1, not yet in Ceph
        blockio.write_direct(source_dev, A_AT, a)
        self.assertEqual(256, self.dirty_blocks('compute1', source_core))
        self.assertEqual(ZEROS, self.ceph_digest(A_AT))

        seen = {}
        destination = self.computes['compute2'].driver._host.get_connection

        def migrate(domain, uri, params, flags):
            # the source drained in its pre-check; the guest still runs
            # on compute1 and writes B before the switchover
            seen.update(dirty_before_b=self.dirty_blocks(
                'compute1', source_core), ceph_a=self.ceph_digest(A_AT))
            blockio.write_direct(source_dev, B_AT, b)
            seen.update(dirty_after_b=self.dirty_blocks(
                'compute1', source_core), ceph_b=self.ceph_digest(B_AT),
                dest_cores=self.cores('compute2'))
            xml = params['destination_xml']
            destination().createXML(xml, 0)
            uuid_ = etree.fromstring(xml).find('./uuid').text
            self.computes['compute1'].driver._host.get_connection(
            ).lookupByUUIDString(uuid_).complete_job()

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', migrate))
        self.admin_api.post_server_action(self.server['id'], {
            'os-migrateLive': {'host': 'compute2',
                               'block_migration': 'auto'}})
        server = self._wait_for_server_parameter(
            self.server, {'OS-EXT-SRV-ATTR:host': 'compute2',
                          'status': 'ACTIVE'})
        # during the migration: A had been flushed, B went straight to Ceph
        dest_cores = seen.pop('dest_cores')
        self.assertEqual({'dirty_before_b': 0, 'ceph_a': blockio.digest(a),
                          'dirty_after_b': 0, 'ceph_b': blockio.digest(b)},
                         seen)
        # after the switchover: every acknowledged byte is in Ceph and
        # the source has no core (so no dirty data) and no mapping left
        self.assertEqual(blockio.digest(a), self.ceph_digest(A_AT))
        self.assertEqual(blockio.digest(b), self.ceph_digest(B_AT))
        self.assertEqual([], self.cores('compute1'))
        self.assertEqual([], self.mappings('compute1'))
        self.assertFalse(os.path.exists(source_dev))
        # the destination serves the data through its own wb core
        [dest_core] = self.cores('compute2')
        self.assertEqual(dest_cores, [dest_core])
        self.assertEqual(dest_core.exported,
                         self.stored_device_path(server, WB_VOL))
        self.assertEqual(2, dest_core.cache_id)    # the wb instance
        dest_dev = dest_core.exported
        self.assertEqual(blockio.digest(a),
                         blockio.digest(blockio.read_direct(
                             dest_dev, A_AT, MIB)))
        self.assertEqual(blockio.digest(b),
                         blockio.digest(blockio.read_direct(
                             dest_dev, B_AT, MIB)))
        # write-back works there: C is dirty on compute2, not in Ceph...
        blockio.write_direct(dest_dev, C_AT, c)
        self.assertEqual(256, self.dirty_blocks('compute2', dest_core))
        self.assertEqual(ZEROS, self.ceph_digest(C_AT))
        # ...until the detach flushes it
        self.detach(server, WB_VOL)
        self.assertEqual(blockio.digest(c), self.ceph_digest(C_AT))
        self.assertEqual([], self.cores('compute2'))
        self.assertEqual([], self.mappings('compute2'))
        self.assertEqual({}, self.cinder.fences)
