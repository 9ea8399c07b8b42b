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

"""Cached volumes seen from a guest, per cache mode.

Each test boots servers, attaches a volume of the mode's type, writes a
known pattern from the guest and checks it after detach/re-attach, reboot
or migration. Where ``compute_host_access`` is set, the Open CAS device is
checked on the compute host too.
"""

from tempest.common import waiters
from tempest import config
from tempest.lib.common import ssh
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
from tempest.scenario import manager

from os_brick_cas_tempest_plugin import helpers

CONF = config.CONF


class CachedVolumeScenarioBase(manager.ScenarioTest):

    credentials = ['primary', 'admin']

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        reason = helpers.skip_reason(CONF.os_brick_cas_tempest)
        if reason:
            raise cls.skipException(reason)
        if not CONF.service_available.cinder:
            raise cls.skipException('Cinder is not available')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_servers_client = cls.os_admin.servers_client

    def require_mode(self, mode):
        reason = helpers.skip_reason(CONF.os_brick_cas_tempest, mode)
        if reason:
            raise self.skipException(reason)

    # -- building blocks ------------------------------------------------
    def boot(self):
        keypair = self.create_keypair()
        security_group = self.create_security_group()
        server = self.create_server(
            key_name=keypair['name'], validatable=True,
            security_groups=[{'name': security_group['name']}],
            wait_until='SSHABLE')
        server['keypair'] = keypair
        return server

    def ssh(self, server):
        return self.get_remote_client(
            self.get_server_ip(server), private_key=server['keypair'][
                'private_key'], server=server)

    def volume_of_mode(self, mode):
        return self.create_volume(
            volume_type=CONF.os_brick_cas_tempest.volume_types[mode])

    def attach(self, server, volume):
        before = set(self.ssh(server).list_disks())
        volume = self.nova_volume_attach(server, volume)
        client = self.ssh(server)
        new_disks = [disk for disk in client.list_disks()
                     if disk not in before]
        self.assertEqual(1, len(new_disks), 'no new disk in the guest')
        return '/dev/' + new_disks[0]

    def write(self, server, device, label):
        self.ssh(server).exec_command(helpers.write_pattern_command(
            device, label))

    def read_md5(self, server, device):
        return self.ssh(server).exec_command(
            helpers.read_md5_command(device)).strip()

    def host_core(self, server, volume_id):
        """The CAS core of the volume on the server's compute host."""
        group = CONF.os_brick_cas_tempest
        if not group.compute_host_access:
            return None
        host = self.admin_servers_client.show_server(server['id'])[
            'server']['OS-EXT-SRV-ATTR:host']
        client = ssh.Client(host, group.compute_ssh_user,
                            key_filename=group.compute_ssh_key_file)
        csv_text = client.exec_command('sudo casadm -L -o csv -b')
        return helpers.cas_core_of_volume(csv_text, volume_id) or False

    # -- the checks per mode ------------------------------------------------
    def check_round_trip(self, mode):
        self.require_mode(mode)
        first, second = self.boot(), self.boot()
        volume = self.volume_of_mode(mode)
        device = self.attach(first, volume)
        core = self.host_core(first, volume['id'])
        if core is not None:
            self.assertTrue(core, 'no Open CAS core for the volume')
            self.assertTrue(core.exported.startswith('/dev/cas'))
        self.write(first, device, volume['id'])
        expected = helpers.md5(helpers.pattern(volume['id']))
        self.assertEqual(expected, self.read_md5(first, device))
        self.nova_volume_detach(first, volume)
        if core is not None:
            self.assertFalse(self.host_core(first, volume['id']),
                             'the CAS core is still there after detach')
        # the same server again, then another one (maybe another host)
        device = self.attach(first, volume)
        self.assertEqual(expected, self.read_md5(first, device))
        self.nova_volume_detach(first, volume)
        device = self.attach(second, volume)
        self.assertEqual(expected, self.read_md5(second, device))
        self.nova_volume_detach(second, volume)


class CachedVolumeRoundTripTest(CachedVolumeScenarioBase):
    """Write, detach, re-attach (same and another server), verify."""

    @decorators.idempotent_id('a0b1c2d3-0001-4e5f-8a9b-0c1d2e3f4a01')
    def test_round_trip_wt(self):
        self.check_round_trip('wt')

    @decorators.idempotent_id('a0b1c2d3-0002-4e5f-8a9b-0c1d2e3f4a02')
    def test_round_trip_wb(self):
        self.check_round_trip('wb')

    @decorators.idempotent_id('a0b1c2d3-0003-4e5f-8a9b-0c1d2e3f4a03')
    def test_round_trip_wa(self):
        self.check_round_trip('wa')

    @decorators.idempotent_id('a0b1c2d3-0004-4e5f-8a9b-0c1d2e3f4a04')
    def test_round_trip_wo(self):
        self.check_round_trip('wo')

    @decorators.idempotent_id('a0b1c2d3-0005-4e5f-8a9b-0c1d2e3f4a05')
    def test_round_trip_pt(self):
        self.check_round_trip('pt')


class CachedVolumeLifecycleTest(CachedVolumeScenarioBase):
    """Reboot, live migration and snapshot rules."""

    @decorators.idempotent_id('b1c2d3e4-0001-4f5a-9b0c-1d2e3f4a5b01')
    def test_data_survives_server_reboot(self):
        mode = 'wb' if 'wb' in CONF.os_brick_cas_tempest.offered_modes \
            else 'wt'
        self.require_mode(mode)
        server = self.boot()
        volume = self.volume_of_mode(mode)
        device = self.attach(server, volume)
        self.write(server, device, volume['id'])
        self.servers_client.reboot_server(server['id'], type='HARD')
        waiters.wait_for_server_status(self.servers_client, server['id'],
                                       'ACTIVE')
        self.assertEqual(helpers.md5(helpers.pattern(volume['id'])),
                         self.read_md5(server, device))

    def _live_migrate(self, server):
        self.admin_servers_client.live_migrate_server(
            server['id'], host=None, block_migration='auto')

    def _require_live_migration(self):
        if not CONF.compute_feature_enabled.live_migration:
            raise self.skipException('live migration is not enabled')
        if CONF.compute.min_compute_nodes < 2:
            raise self.skipException('live migration needs 2 computes '
                                     '([compute] min_compute_nodes)')

    @decorators.idempotent_id('b1c2d3e4-0002-4f5a-9b0c-1d2e3f4a5b02')
    def test_write_through_live_migration_keeps_data(self):
        self.require_mode('wt')
        self._require_live_migration()
        server = self.boot()
        volume = self.volume_of_mode('wt')
        device = self.attach(server, volume)
        self.write(server, device, volume['id'])
        source = self.admin_servers_client.show_server(server['id'])[
            'server']['OS-EXT-SRV-ATTR:host']
        self._live_migrate(server)
        waiters.wait_for_server_status(self.admin_servers_client,
                                       server['id'], 'ACTIVE')
        moved = self.admin_servers_client.show_server(server['id'])['server']
        self.assertNotEqual(source, moved['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(helpers.md5(helpers.pattern(volume['id'])),
                         self.read_md5(server, device))

    @decorators.idempotent_id('b1c2d3e4-0003-4f5a-9b0c-1d2e3f4a5b03')
    def test_write_back_live_migration_refused(self):
        self.require_mode('wb')
        self._require_live_migration()
        server = self.boot()
        volume = self.volume_of_mode('wb')
        self.attach(server, volume)
        source = self.admin_servers_client.show_server(server['id'])[
            'server']['OS-EXT-SRV-ATTR:host']
        try:
            self._live_migrate(server)
        except lib_exc.BadRequest:
            pass            # refused by the API's synchronous pre-check
        waiters.wait_for_server_status(self.admin_servers_client,
                                       server['id'], 'ACTIVE')
        self.assertEqual(source, self.admin_servers_client.show_server(
            server['id'])['server']['OS-EXT-SRV-ATTR:host'])

    @decorators.idempotent_id('b1c2d3e4-0004-4f5a-9b0c-1d2e3f4a5b04')
    def test_snapshot_of_attached_write_back_volume(self):
        self.require_mode('wb')
        server = self.boot()
        volume = self.volume_of_mode('wb')
        self.attach(server, volume)
        try:
            snapshot = self.snapshots_client.create_snapshot(
                volume_id=volume['id'], force=True)['snapshot']
        except lib_exc.BadRequest:
            snapshot = None
        if snapshot is not None:
            # refused by the driver: the snapshot ends in error
            waiters.wait_for_volume_resource_status(
                self.snapshots_client, snapshot['id'], 'error')
            self.snapshots_client.delete_snapshot(snapshot['id'])
        self.nova_volume_detach(server, volume)
        snapshot = self.create_volume_snapshot(volume['id'])
        self.assertEqual('available', snapshot['status'])
