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

A write-back volume may hold writes only in the compute host's cache, so
its live migration and snapshots while attached are refused (and the
data is unharmed); a write-through volume live-migrates with its data,
and a detached write-back volume snapshots with everything written.
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

FAILED_MIGRATION = ('error', 'failed')
FINISHED_MIGRATION = FAILED_MIGRATION + ('completed', 'done', 'cancelled')


class TestLiveMigrationWriteThrough(base.CachedVolumeScenarioTest):
    cache_mode = 'wt'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        cls.skip_unless_live_migration()

    @decorators.attr(type=['slow', 'multinode'])
    @decorators.idempotent_id('ba109c32-4897-47b1-809f-ef1992869f2f')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_live_migration_keeps_data(self):
        guest = self.boot_guest()
        volume = self.create_cached_volume()
        pattern = helpers.GuestPattern(volume['id'])
        device = self.attach(guest, volume)
        source = self.get_host_for_server(guest.server['id'])
        source_core = self.assert_cas_device(source, volume, 'wt')
        self.write_pattern(guest, device, pattern)

        self.request_live_migration(guest.server)
        waiters.wait_for_server_status(self.servers_client,
                                       guest.server['id'], 'ACTIVE')
        destination = self.get_host_for_server(guest.server['id'])
        self.assertNotEqual(
            source, destination,
            'server %s did not move; its live migrations: %s'
            % (guest.server['id'], self.live_migrations_of(guest.server)))

        self.assert_pattern(guest, device, pattern,
                            'after live migration from %s to %s'
                            % (source, destination))
        self.assert_cas_device(destination, volume, 'wt')
        self.assert_cas_device_gone(source, volume, source_core)


class TestLiveMigrationWriteBack(base.CachedVolumeScenarioTest):
    cache_mode = 'wb'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        cls.skip_unless_live_migration()

    def _wait_for_failed_live_migration(self, server):
        state = {}

        def finished():
            migrations = self.live_migrations_of(server)
            state['migrations'] = migrations
            return bool(migrations) and all(
                m['status'] in FINISHED_MIGRATION for m in migrations)

        if not test_utils.call_until_true(finished,
                                          CONF.compute.build_timeout,
                                          CONF.compute.build_interval):
            raise lib_exc.TimeoutException(
                'live migration of server %s did not finish: %s'
                % (server['id'], state.get('migrations')))
        statuses = [m['status'] for m in state['migrations']]
        self.assertTrue(all(s in FAILED_MIGRATION for s in statuses),
                        'live migration of server %s with an attached '
                        'write-back volume was not refused: %s'
                        % (server['id'], state['migrations']))

    @decorators.attr(type=['slow', 'multinode', 'negative'])
    @decorators.idempotent_id('925e3814-0945-422e-9743-151d009b00f6')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_live_migration_refused(self):
        guest = self.boot_guest()
        volume = self.create_cached_volume()
        pattern = helpers.GuestPattern(volume['id'])
        device = self.attach(guest, volume)
        source = self.get_host_for_server(guest.server['id'])
        self.write_pattern(guest, device, pattern)

        try:
            # Before compute API 2.34 the pre-check answers the request.
            self.request_live_migration(guest.server)
        except lib_exc.BadRequest:
            pass
        else:
            # From 2.34 it runs after the 202; the migration must fail.
            self._wait_for_failed_live_migration(guest.server)

        waiters.wait_for_server_status(self.servers_client,
                                       guest.server['id'], 'ACTIVE')
        self.assertEqual(source, self.get_host_for_server(guest.server['id']),
                         'server with a write-back volume left its host')
        self.assertEqual(
            'in-use',
            self.volumes_client.show_volume(volume['id'])['volume']['status'])
        self.assert_cas_device(source, volume, 'wb')
        self.assert_pattern(guest, device, pattern,
                            'after the refused live migration')


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
