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


"""Differences between the nova releases' in-tree test fixtures.

nova's functional test helpers change between releases; the tests here use
the newest release's names, and this module supplies them on the older
releases (the test side of :mod:`nova_ext.compat`), each branch naming its
release.
"""

from nova.tests.functional.libvirt import base

from nova_ext import compat
from os_brick_cas import compat as cas_compat


class _Before2026_2(base.ServersTestBase):
    """2026.1 (nova 33) and older: helpers nova 34 (2026.2) changed."""

    def _wait_for_state_change(self, server, expected_status, max_retries=10,
                               wait_for_fault_key=True):
        """nova 34's signature; older nova never waits for the fault key."""
        return super()._wait_for_state_change(server, expected_status,
                                              max_retries)


class _Before2026_1(_Before2026_2):
    """2025.1 (nova 31): helpers nova 33 (2026.1) added or extended."""

    def _attach_volume(self, server, volume_id):
        """Attach a cinder volume and wait for nova's attach.end."""
        self.api.post_server_volume(
            server['id'], {'volumeAttachment': {'volumeId': volume_id}})
        self._wait_for_volume_attach(server['id'], volume_id)
        self.notifier.wait_for_versioned_notifications(
            'instance.volume_attach.end')

    def _live_migrate(self, server, migration_expected_state='completed',
                      server_expected_state='ACTIVE', api=None, host=None,
                      wait_for_fault_key=True):
        """nova 31's takes no target host: nova 33's, with one."""
        (api or self.api).post_server_action(
            server['id'],
            {'os-migrateLive': {'host': host, 'block_migration': 'auto'}})
        self._wait_for_migration_status(server, [migration_expected_state])
        return self._wait_for_state_change(server, server_expected_state)


if cas_compat.at_least(compat.RELEASE, '2026.2'):
    ServersTestBase = base.ServersTestBase
elif cas_compat.at_least(compat.RELEASE, '2026.1'):
    ServersTestBase = _Before2026_2
else:
    ServersTestBase = _Before2026_1
