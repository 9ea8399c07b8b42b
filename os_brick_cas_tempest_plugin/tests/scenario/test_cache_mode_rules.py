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

"""What the cloud allows and refuses because of a volume's cache mode.

A write-back volume may hold writes only in the compute host's cache:
Cinder refuses a snapshot of it while it is attached and not drained
(the data is unharmed), and a detached one snapshots with everything
written. Write-through and write-back volumes live-migrate with their
data (a write-back one is drained by the source first).
"""

from tempest.common import utils
from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from os_brick_cas_tempest_plugin import helpers
from os_brick_cas_tempest_plugin.tests.scenario import base

CONF = config.CONF


class _LiveMigrationKeepsData(base.CachedVolumeScenarioTest):
    """A cached volume live-migrates with its data and its cache mode."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        cls.skip_unless_live_migration()

    def check_live_migration_keeps_data(self):
        guest = self.boot_guest()
        volume = self.create_cached_volume()
        pattern = helpers.GuestPattern(volume['id'])
        device = self.attach(guest, volume)
        source = self.get_host_for_server(guest.server['id'])
        source_core = self.assert_cas_device(source, volume,
                                             self.cache_mode)
        self.write_pattern(guest, device, pattern)

        self.request_live_migration(guest.server)
        waiters.wait_for_server_status(self.servers_client,
                                       guest.server['id'], 'ACTIVE')
        destination = self.get_host_for_server(guest.server['id'])
        self.assertNotEqual(
            source, destination,
            'server %s did not move; its live migrations: %s'
            % (guest.server['id'], self.live_migrations_of(guest.server)))
        statuses = [m['status'] for m in self.live_migrations_of(
            guest.server)]
        self.assertNotIn('error', statuses)

        self.assert_pattern(guest, device, pattern,
                            'after live migration from %s to %s'
                            % (source, destination))
        self.assert_cas_device(destination, volume, self.cache_mode)
        self.assert_cas_device_gone(source, volume, source_core)


class TestLiveMigrationWriteThrough(_LiveMigrationKeepsData):
    cache_mode = 'wt'

    @decorators.attr(type=['slow', 'multinode'])
    @decorators.idempotent_id('ba109c32-4897-47b1-809f-ef1992869f2f')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_live_migration_keeps_data(self):
        self.check_live_migration_keeps_data()


class TestLiveMigrationWriteBack(_LiveMigrationKeepsData):
    """The source drains the volume before the switchover (issue 15).

    Drained, Ceph has every write the guest got acknowledged and new
    writes go straight to it; the destination attaches its own
    write-back core and owns the volume from then on.
    """

    cache_mode = 'wb'

    @decorators.attr(type=['slow', 'multinode'])
    @decorators.idempotent_id('cd44ef48-56ba-4834-8ab3-0b58082b6bc2')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_live_migration_keeps_data(self):
        self.check_live_migration_keeps_data()


class TestSnapshotRuleWriteBack(base.CachedVolumeScenarioTest):
    cache_mode = 'wb'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.volume_feature_enabled.snapshot:
            raise cls.skipException('Cinder volume snapshots are disabled '
                                    '([volume-feature-enabled] snapshot)')

    def _try_snapshot_of_attached(self, volume):
        """Snapshot while attached: None if refused, else its status."""
        try:
            snapshot = self.snapshots_client.create_snapshot(
                volume_id=volume['id'], force=True,
                name=data_utils.rand_name(
                    prefix=CONF.resource_name_prefix,
                    name=self.__class__.__name__ + '-attached'))['snapshot']
        except lib_exc.BadRequest as exc:
            self.assertIn('cach', str(exc).lower(),
                          'the snapshot was refused, but not because of the '
                          'cache: %s' % exc)
            return None
        self.addCleanup(self.snapshots_client.wait_for_resource_deletion,
                        snapshot['id'])
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.snapshots_client.delete_snapshot,
                        snapshot['id'])
        state = {}

        def settled():
            state['status'] = self.snapshots_client.show_snapshot(
                snapshot['id'])['snapshot']['status']
            return state['status'] in ('available', 'error')

        if not test_utils.call_until_true(settled, CONF.volume.build_timeout,
                                          CONF.volume.build_interval):
            raise lib_exc.TimeoutException(
                'snapshot %s stayed %s' % (snapshot['id'],
                                           state.get('status')))
        return state['status']

    @decorators.attr(type='slow')
    @decorators.idempotent_id('91243b86-1391-4a18-8ee1-a80c9948e0a4')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_snapshot_refused_while_attached_allowed_after_detach(self):
        guest = self.boot_guest()
        volume = self.create_cached_volume()
        pattern = helpers.GuestPattern(volume['id'])
        device = self.attach(guest, volume)
        self.write_pattern(guest, device, pattern)

        status = self._try_snapshot_of_attached(volume)
        self.assertIn(status, (None, 'error'),
                      'a snapshot of attached write-back volume %s was '
                      'taken' % volume['id'])
        self.assertEqual(
            'in-use',
            self.volumes_client.show_volume(volume['id'])['volume']['status'])
        self.assert_pattern(guest, device, pattern,
                            'after the refused snapshot')

        # Detach flushes the host cache, so the snapshot holds the pattern.
        self.detach(guest, volume)
        snapshot = self.create_volume_snapshot(volume['id'])
        restored = self.create_volume(snapshot_id=snapshot['id'])
        restored_device = self.attach(guest, restored)
        self.assert_pattern(guest, restored_device, pattern,
                            'in a volume made from the snapshot taken after '
                            'detach')
