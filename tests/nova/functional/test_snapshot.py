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

"""Issue 13 (g): snapshot of a volume-backed server with a wb root volume.

nova quiesces and calls cinder's create_snapshot_force. cinder_ext's API
extension refuses it synchronously (tests/cinder/test_sync_guards.py): at
the process boundary here, CinderFixture's create_snapshot_force answers
as cinder-api with the extension does, through cinder_ext.guards itself.
Before, the refusal came from the driver after a 202, and nova recorded
an image pointing at an errored snapshot.
"""

from cinder import exception as cinder_exception
import fixtures
from nova import exception as nova_exception
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.api import client

from cinder_ext import guards
from tests.nova.functional import base

ROOT = nova_fixtures.CinderFixture.IMAGE_BACKED_VOL


class _TypedVolume(object):
    """What cinder_ext's guard reads of a volume: status and type."""

    def __init__(self, volume: dict, mode: str):
        self.id = volume['id']
        self.status = volume['status']
        self.attach_status = volume.get('attach_status')
        self.volume_type = {'extra_specs': {
            'cacheable': '<is> True', 'cas:cache_mode': mode}}


class VolumeBackedSnapshotTestCase(base.CachedVolumeTestBase):

    ADMIN_API = True
    volumes = {ROOT: 'wb'}

    def setUp(self):
        super().setUp()
        self.start_compute('compute1')
        self.flags(host='compute1')
        from nova.volume import cinder as nova_cinder
        # the CinderFixture's own fake, patched in by the test base
        original = nova_cinder.API.create_snapshot_force.side_effect
        fixture = original.__self__
        self.cinder_fixture = fixture
        # what cinder's volume show has and the fixture's default lacks
        # (nova's snapshot_volume_backed reads it)
        fixture.volumes[ROOT] = {
            'id': ROOT, 'display_name': 'root', 'display_description': '',
            'size': 1, 'multiattach': False, 'availability_zone': 'nova'}

        def create_snapshot_force(ctxt, volume_id, name, description):
            volume = fixture.fake_get(ctxt, volume_id)
            try:
                guards.refuse_if_dirty_capable(
                    _TypedVolume(volume, self.volumes[volume_id]),
                    'snapshot')
            except cinder_exception.InvalidVolume as exc:
                # cinder-api's 400, as nova.volume.cinder translates it
                raise nova_exception.InvalidInput(reason=exc.msg)
            return original(ctxt, volume_id, name, description)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.volume.cinder.API.create_snapshot_force',
            lambda api, *args: create_snapshot_force(*args)))

    def test_snapshot_refused_before_any_image_exists(self):
        server = self._build_server(image_uuid='', networks='none')
        server['block_device_mapping_v2'] = [{
            'boot_index': 0, 'uuid': ROOT, 'source_type': 'volume',
            'destination_type': 'volume'}]
        server = self.api.post_server({'server': server})
        server = self._wait_for_state_change(server, 'ACTIVE')
        [core] = self.cores()
        self.assertEqual(2, core.cache_id)             # the wb instance
        images_before = set(self.glance.images)
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'createImage': {'name': 'backup-of-wb'}})
        self.assertEqual(400, exc.response.status_code)
        self.assertIn('newest writes may not be in Ceph', str(exc))
        self.assertEqual(images_before,
                         set(self.glance.images))
        self.assertEqual({}, dict(self.cinder_fixture.volume_snapshots))
        self._wait_for_state_change(server, 'ACTIVE')
