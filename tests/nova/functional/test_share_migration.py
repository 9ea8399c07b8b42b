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

"""A volume's cache share through a live migration (issue 35, point 1).

nova 34's real compute manager on two simulated hosts: the destination's
pre_live_migration attach gives the volume its class in the destination
instance's IO-class table, the source drops its class at post, and a
rollback drops the destination's class again. A destination without
room for the share takes the volume without it (never a failed
migration for a share).
"""

import uuid


from os_brick_cas import io_class_table
from os_brick_cas.opencas import casadm_output
from tests.nova.functional import test_lifecycle

SHARED_WT = str(uuid.UUID(int=0x5ea7e1))
SHARED_WB = str(uuid.UUID(int=0x5ea7e2))
#: a volume of another server on compute2 that takes most of its cache
BIG_WT = str(uuid.UUID(int=0x5ea7e3))
SHARES = {SHARED_WT: 40, SHARED_WB: 30, BIG_WT: 70}
WT, WB = 1, 2


class ShareLiveMigrationTestCase(test_lifecycle.LiveMigrationTestBase):

    volumes = {SHARED_WT: 'wt', SHARED_WB: 'wb', BIG_WT: 'wt'}

    @staticmethod
    def rbd_info(image: str, mode):
        info = test_lifecycle.LiveMigrationTestBase.rbd_info(image, mode)
        share = SHARES.get(image.replace('volume-', ''))
        if share is not None:
            # what cinder_ext's driver adds for cas:cache_share
            info['data']['cache_share'] = share
        return info

    def table(self, compute: str, cache_id: int
              ) -> list[io_class_table.Entry]:
        """What *compute*'s IO-class table of *cache_id* gives each core."""
        loaded = casadm_output.parse_io_classes(self._tool(
            compute, 'casadm', '-C', '-L', '-i', str(cache_id), '-o', 'csv'))
        self.assertTrue(io_class_table.is_composed(loaded), loaded)
        return io_class_table.entries(loaded)

    def share_status(self, compute: str, volume_id: str
                     ) -> io_class_table.ShareStatus:
        """connector.cache_share() on *compute* for *volume_id*."""
        driver = self.computes[compute].driver._cached_rbd_volume_driver()
        with self.on_host(compute):
            return driver.connector.cache_share(self.rbd_info(
                'volume-' + volume_id, self.volumes[volume_id])['data'])

    def test_share_moves_with_a_write_through_volume(self):
        self._attach_volume(self.server, SHARED_WT)
        [source] = self.cores('compute1')
        self.assertEqual([io_class_table.Entry(source.core_id, 40)],
                         self.table('compute1', WT))
        server = self._live_migrate(self.server, host='compute2',
                                    api=self.admin_api)
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        [dest] = self.cores('compute2')
        # the destination's attach placed the class; the source's post
        # dropped its own with the core
        self.assertEqual([io_class_table.Entry(dest.core_id, 40)],
                         self.table('compute2', WT))
        self.assertEqual([], self.table('compute1', WT))
        self.assertEqual(io_class_table.ShareStatus(40, 40),
                         self.share_status('compute2', SHARED_WT))
        self.detach(server, SHARED_WT)
        self.assertEqual([], self.table('compute2', WT))

    def test_drained_share_moves_with_a_write_back_volume(self):
        self._attach_volume(self.server, SHARED_WB)
        [source] = self.cores('compute1')
        self.host.set_dirty(source.cache_id, source.core_id, 16)
        seen = {}
        self.at_switchover = lambda: seen.update(
            source=self.table('compute1', WB),
            dest=self.table('compute2', WB),
            dest_cores=self.cores('compute2'))
        self.migrate_to_compute2()
        server = self._wait_for_server_parameter(
            self.server, {'OS-EXT-SRV-ATTR:host': 'compute2',
                          'status': 'ACTIVE'})
        [dest] = seen['dest_cores']
        # at the switchover: the source drained (allocation 0, the share
        # remembered), the destination capped at the share
        self.assertEqual([io_class_table.Entry(source.core_id, 30, True)],
                         seen['source'])
        self.assertEqual([io_class_table.Entry(dest.core_id, 30)],
                         seen['dest'])
        self.assertEqual([], self.table('compute1', WB))
        self.assertEqual([io_class_table.Entry(dest.core_id, 30)],
                         self.table('compute2', WB))
        self.detach(server, SHARED_WB)
        self.assertEqual([], self.table('compute2', WB))

    def test_rollback_drops_the_destination_class(self):
        self._attach_volume(self.server, SHARED_WB)
        [source] = self.cores('compute1')
        seen = {}
        self.fail_migration_job(seen)
        self.migrate_to_compute2()
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        # it got as far as the destination's attach
        self.assertEqual(1, len(seen['dest_cores']))
        # the destination's rollback removed its core and its class; the
        # source's undrain gave the share back
        self.assertEqual([], self.cores('compute2'))
        self.assertEqual([], self.table('compute2', WB))
        self.assertEqual([io_class_table.Entry(source.core_id, 30)],
                         self.table('compute1', WB))
        self.flags(host='compute1')     # nova's detach checks CONF.host
        self.detach(server, SHARED_WB)
        self.assertEqual([], self.table('compute1', WB))

    def test_destination_without_room_takes_the_volume_unshared(self):
        other = self._create_server(networks='none', host='compute2',
                                    api=self.admin_api)
        self._attach_volume(other, BIG_WT)
        [big] = self.cores('compute2')
        self._attach_volume(self.server, SHARED_WT)
        server = self._live_migrate(self.server, host='compute2',
                                    api=self.admin_api)
        # never a failed migration for a share: it moved, uncapped
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(2, len(self.cores('compute2')))
        self.assertEqual([io_class_table.Entry(big.core_id, 70)],
                         self.table('compute2', WT))
        self.assertEqual([], self.table('compute1', WT))
        self.assertIn('asked for a 40% cache share and has none',
                      self.stdlog.logger.output)
        self.assertIn('gets no IO class for its cache share',
                      self.stdlog.logger.output)
        self.assertEqual(io_class_table.ShareStatus(40, None),
                         self.share_status('compute2', SHARED_WT))
        # once the other volume leaves, the next attach gets the share
        self.detach(other, BIG_WT)
        self.detach(server, SHARED_WT)
        self.assertEqual([], self.table('compute2', WT))
