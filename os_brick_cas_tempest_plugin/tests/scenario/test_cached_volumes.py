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

"""Data written from a guest to a cached volume, per cache mode.

One class per Open CAS mode, so a mode the cloud does not offer is skipped
as a whole with the reason. Where ``[os_brick_cas_tempest]
compute_host_access`` is set, every attach is also checked on the compute
host (one active core in a cache instance of the right mode, /dev/casI-J
present) and every detach (core and device gone).
"""

import os

from tempest.common import utils
from tempest.common import waiters
from tempest import config
from tempest.lib import decorators

from os_brick_cas_tempest_plugin import helpers
from os_brick_cas_tempest_plugin.tests.scenario import base

CONF = config.CONF


class _CachedVolumeDataTest(base.CachedVolumeScenarioTest):
    """The checks; subclasses choose the mode and carry the test ids."""

    def _attach_checked(self, guest, volume):
        device = self.attach(guest, volume)
        host = self.get_host_for_server(guest.server['id'])
        core = self.assert_cas_device(host, volume, self.cache_mode)
        return device, host, core

    def _detach_checked(self, guest, volume, host, core):
        self.detach(guest, volume)
        self.assert_cas_device_gone(host, volume, core)

    def _test_data_survives_detach_and_reattach(self):
        first = self.boot_guest()
        second = self.boot_guest()
        volume = self.create_cached_volume()
        pattern = helpers.GuestPattern(volume['id'])

        device, host, core = self._attach_checked(first, volume)
        self.write_pattern(first, device, pattern)
        self.assert_pattern(first, device, pattern, 'right after writing')
        self._detach_checked(first, volume, host, core)

        device, host, core = self._attach_checked(first, volume)
        self.assert_pattern(first, device, pattern,
                            'after detach and re-attach to the same server')
        self._detach_checked(first, volume, host, core)

        device, host, core = self._attach_checked(second, volume)
        self.assert_pattern(second, device, pattern,
                            'after detach and attach to another server')
        self._detach_checked(second, volume, host, core)

    def _test_data_survives_server_reboot(self):
        guest = self.boot_guest()
        volume = self.create_cached_volume()
        pattern = helpers.GuestPattern(volume['id'])
        device, host, _ = self._attach_checked(guest, volume)
        self.write_pattern(guest, device, pattern)

        # A hard reboot makes nova disconnect and connect the volume again.
        self.servers_client.reboot_server(guest.server['id'], type='HARD')
        waiters.wait_for_server_status(self.servers_client,
                                       guest.server['id'], 'ACTIVE')
        self.assertEqual(host, self.get_host_for_server(guest.server['id']))
        self.assert_cas_device(host, volume, self.cache_mode)
        self.assertIn(os.path.basename(device),
                      self.guest_client(guest).list_disks(),
                      'the volume is no longer %s in the guest after the '
                      'reboot' % device)
        self.assert_pattern(guest, device, pattern,
                            'after a hard reboot of the server')


class TestCachedVolumeDataWriteThrough(_CachedVolumeDataTest):
    cache_mode = 'wt'

    @decorators.attr(type='slow')
    @decorators.idempotent_id('732f032d-d46d-4ff6-adc2-19bf093473b9')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_detach_and_reattach(self):
        self._test_data_survives_detach_and_reattach()

    @decorators.attr(type='slow')
    @decorators.idempotent_id('611ffe98-bb0e-4b65-b0d9-f3cc3547afb5')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_server_reboot(self):
        self._test_data_survives_server_reboot()


class TestCachedVolumeDataWriteBack(_CachedVolumeDataTest):
    cache_mode = 'wb'

    @decorators.attr(type='slow')
    @decorators.idempotent_id('5ad9a99d-7113-4306-b612-7b9dd0f64ab0')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_detach_and_reattach(self):
        self._test_data_survives_detach_and_reattach()

    @decorators.attr(type='slow')
    @decorators.idempotent_id('6c914001-9274-40ce-b07c-51aaabb532ec')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_server_reboot(self):
        self._test_data_survives_server_reboot()


class TestCachedVolumeDataWriteAround(_CachedVolumeDataTest):
    cache_mode = 'wa'

    @decorators.attr(type='slow')
    @decorators.idempotent_id('ce49170f-c210-46d5-92f2-82cfe4fb3ab9')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_detach_and_reattach(self):
        self._test_data_survives_detach_and_reattach()

    @decorators.attr(type='slow')
    @decorators.idempotent_id('45d5fd3a-7d7e-4560-b0e3-9e19fc3e2748')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_server_reboot(self):
        self._test_data_survives_server_reboot()


class TestCachedVolumeDataWriteOnly(_CachedVolumeDataTest):
    cache_mode = 'wo'

    @decorators.attr(type='slow')
    @decorators.idempotent_id('d8dc2ef5-cb55-4ff6-bd5f-35548053ba9f')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_detach_and_reattach(self):
        self._test_data_survives_detach_and_reattach()

    @decorators.attr(type='slow')
    @decorators.idempotent_id('95b1188e-5afd-460b-a994-5d307c356d3f')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_server_reboot(self):
        self._test_data_survives_server_reboot()


class TestCachedVolumeDataPassThrough(_CachedVolumeDataTest):
    cache_mode = 'pt'

    @decorators.attr(type='slow')
    @decorators.idempotent_id('aea52fe8-c7f6-4e0c-91fb-dab815d10d52')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_detach_and_reattach(self):
        self._test_data_survives_detach_and_reattach()

    @decorators.attr(type='slow')
    @decorators.idempotent_id('a7bfa31b-a04e-4e6f-bef9-954948bb2c54')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_data_survives_server_reboot(self):
        self._test_data_survives_server_reboot()


class TestCasDeviceOnComputeHost(base.CachedVolumeScenarioTest):
    """The compute host's view, for every offered mode (admin ssh)."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        reason = cls.host_skip_reason()
        if reason:
            raise cls.skipException(reason)

    @decorators.idempotent_id('880abf83-ca95-4999-9016-6f059e06a058')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_cas_device_exists_only_while_attached(self):
        guest = self.boot_guest()
        for mode in CONF.os_brick_cas_tempest.offered_modes:
            volume = self.create_cached_volume(mode)
            self.attach(guest, volume)
            host = self.get_host_for_server(guest.server['id'])
            core = self.assert_cas_device(host, volume, mode)
            self.detach(guest, volume)
            self.assert_cas_device_gone(host, volume, core)
