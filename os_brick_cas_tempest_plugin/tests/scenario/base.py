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

"""Shared building blocks of the scenario tests.

A test class sets ``cache_mode`` (or leaves it None for tests that are
not about one mode); ``skip_checks`` then skips the whole class, with the
reason, when the feature is disabled or that mode is not offered.
"""

import dataclasses

from oslo_log import log as logging
from tempest.common import waiters
from tempest import config
from tempest.lib.common import api_version_request
from tempest.lib.common import ssh
from tempest.lib.common.utils import test_utils
from tempest.lib import exceptions as lib_exc
from tempest.scenario import manager

from os_brick_cas_tempest_plugin import helpers

CONF = config.CONF
LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Guest:
    """A booted server the test can log in to."""

    server: dict
    private_key: str
    ip: str


class CachedVolumeScenarioTest(manager.ScenarioTest):
    """Boots guests, attaches cached volumes, checks guest data and host."""

    credentials = ['primary', 'admin']

    #: The Open CAS mode a subclass tests, or None.
    cache_mode = None

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        group = CONF.os_brick_cas_tempest
        reason = helpers.feature_skip_reason(group.enabled)
        if reason:
            raise cls.skipException(reason)
        for service in ('cinder', 'nova'):
            if not getattr(CONF.service_available, service):
                raise cls.skipException('%s is not available' % service)
        if cls.cache_mode:
            reason = helpers.mode_skip_reason(
                group.enabled, group.offered_modes, cls.cache_mode)
            if reason:
                raise cls.skipException(reason)
            cls.volume_type_name()
        # Fail early (not per test) on half-configured host access.
        cls.host_checks_enabled()

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_servers_client = cls.os_admin.servers_client

    # -- configuration -------------------------------------------------------

    @classmethod
    def volume_type_name(cls, mode=None):
        try:
            return helpers.volume_type_for_mode(
                CONF.os_brick_cas_tempest.volume_types, mode or cls.cache_mode)
        except helpers.ConfigurationError as exc:
            raise lib_exc.InvalidConfiguration(str(exc)) from None

    @classmethod
    def host_skip_reason(cls):
        """Why compute-host checks are off (None when they run)."""
        group = CONF.os_brick_cas_tempest
        try:
            return helpers.host_access_skip_reason(
                group.compute_host_access, group.compute_ssh_user,
                group.compute_ssh_key_file)
        except helpers.ConfigurationError as exc:
            raise lib_exc.InvalidConfiguration(str(exc)) from None

    @classmethod
    def host_checks_enabled(cls):
        return cls.host_skip_reason() is None

    # -- guests --------------------------------------------------------------

    def boot_guest(self):
        """A server reachable over ssh, with its own keypair."""
        keypair = self.create_keypair()
        security_group = self.create_security_group()
        server = self.create_server(
            key_name=keypair['name'],
            security_groups=[{'name': security_group['name']}])
        guest = Guest(server, keypair['private_key'],
                      self.get_server_ip(server))
        self.guest_client(guest)  # waits until the guest accepts ssh
        return guest

    def guest_client(self, guest):
        return self.get_remote_client(guest.ip,
                                      private_key=guest.private_key,
                                      server=guest.server)

    def create_cached_volume(self, mode=None):
        return self.create_volume(volume_type=self.volume_type_name(mode))

    def attach(self, guest, volume):
        """Attach *volume* to *guest*; return its device in the guest."""
        client = self.guest_client(guest)
        before = client.list_disks()
        self.nova_volume_attach(guest.server, volume)

        def new_disk_seen():
            return len(client.list_disks()) > len(before)

        if not test_utils.call_until_true(new_disk_seen,
                                          CONF.compute.build_timeout,
                                          CONF.compute.build_interval):
            raise lib_exc.TimeoutException(
                'volume %s attached to server %s but no new disk appeared '
                'in the guest' % (volume['id'], guest.server['id']))
        return helpers.new_guest_disk(before, client.list_disks())

    def detach(self, guest, volume):
        self.nova_volume_detach(guest.server, volume)
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'available')

    def write_pattern(self, guest, device, pattern):
        self.guest_client(guest).exec_command(pattern.write_command(device))

    def assert_pattern(self, guest, device, pattern, when):
        """The pattern reads back from the disk (not the guest's cache)."""
        client = self.guest_client(guest)
        client.exec_command(helpers.drop_caches_command())
        output = client.exec_command(pattern.read_command(device))
        mismatches = pattern.mismatches(output)
        if mismatches:
            self.fail('%s, data written from the guest to %s did not read '
                      'back: %s' % (when, device,
                                    '; '.join(str(m) for m in mismatches)))

    # -- compute hosts -----------------------------------------------------

    def _host_client(self, host):
        group = CONF.os_brick_cas_tempest
        return ssh.Client(
            helpers.compute_host_address(host, group.compute_host_addresses),
            group.compute_ssh_user,
            key_filename=group.compute_ssh_key_file,
            look_for_keys=False)

    def _host_cores(self, client):
        return helpers.parse_casadm_list(
            client.exec_command(helpers.CASADM_LIST_COMMAND))

    def assert_cas_device(self, host, volume, mode):
        """Exactly one active core for *volume* on *host*, in *mode*.

        Returns the core; None without compute-host access.
        """
        if not self.host_checks_enabled():
            LOG.info('Not checking the Open CAS device of volume %s on %s: '
                     'no compute host access configured', volume['id'], host)
            return None
        client = self._host_client(host)
        cores = helpers.cores_for_volume(self._host_cores(client),
                                         volume['id'])
        self.assertEqual(1, len(cores),
                         'expected one Open CAS core for volume %s on %s, '
                         'found %s' % (volume['id'], host, cores))
        core = cores[0]
        self.assertFalse(core.in_core_pool,
                         'core of volume %s is in the core pool, not in a '
                         'cache: %s' % (volume['id'], core))
        self.assertEqual(mode, core.cache_mode,
                         'volume %s is cached by an instance in mode %s' %
                         (volume['id'], core.cache_mode))
        self.assertEqual('Active', core.status)
        self.assertTrue(helpers.is_cas_device(core.device),
                        'core %s exports no /dev/casI-J device' % (core,))
        self.assertEqual(
            'present',
            client.exec_command('if [ -b %s ]; then echo present; else echo '
                                'absent; fi' % core.device).strip(),
            '%s is listed by casadm but is not a block device on %s'
            % (core.device, host))
        return core

    def assert_cas_device_gone(self, host, volume, core):
        """After detach: no core for *volume*, its device removed."""
        if core is None:
            return
        client = self._host_client(host)
        state = {}

        def gone():
            cores = self._host_cores(client)
            state['cores'] = cores
            return not helpers.cores_for_volume(cores, volume['id'])

        if not test_utils.call_until_true(gone, CONF.compute.build_timeout,
                                          CONF.compute.build_interval):
            self.fail('volume %s is detached but %s still lists its core: '
                      '%s' % (volume['id'], host, helpers.cores_for_volume(
                          state['cores'], volume['id'])))
        if any(other.device == core.device for other in state['cores']):
            return  # the device name was reused by another volume's core
        self.assertEqual(
            'absent',
            client.exec_command('if [ -e %s ]; then echo present; else echo '
                                'absent; fi' % core.device).strip(),
            '%s of detached volume %s still exists on %s'
            % (core.device, volume['id'], host))

    # -- live migration ----------------------------------------------------

    @classmethod
    def skip_unless_live_migration(cls):
        if not CONF.compute_feature_enabled.live_migration:
            raise cls.skipException(
                'live migration is not available '
                '([compute-feature-enabled] live_migration = False)')
        if CONF.compute.min_compute_nodes < 2:
            raise cls.skipException(
                'live migration needs two compute hosts '
                '([compute] min_compute_nodes < 2)')

    def request_live_migration(self, server):
        """Ask nova to live-migrate *server* to a host it chooses."""
        kwargs = {'host': None,
                  'block_migration': (CONF.compute_feature_enabled.
                                      block_migration_for_live_migration)}
        version = self.compute_request_microversion
        if version is None or (
                api_version_request.APIVersionRequest(version) <
                api_version_request.APIVersionRequest('2.25')):
            kwargs['disk_over_commit'] = False
        self.admin_servers_client.live_migrate_server(server['id'],
                                                      **kwargs)

    def live_migrations_of(self, server):
        migrations = self.os_admin.migrations_client.list_migrations()[
            'migrations']
        return [m for m in migrations
                if m['instance_uuid'] == server['id'] and
                m.get('migration_type', 'live-migration') == 'live-migration']
