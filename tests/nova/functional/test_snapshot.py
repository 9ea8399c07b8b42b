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

"""Snapshot of a volume-backed server with a wb root volume.

nova quiesces the guest (qemu guest agent: fsfreeze), calls cinder's
create_snapshot_force per volume, then unquiesces. Under the quiesce,
nova_ext's driver drains the write-back volumes; cinder_ext's API
extension allows the snapshot of a volume drained by its marker's own
attachment and refuses any other attached wb volume synchronously
(tests/cinder/test_sync_guards.py). At the process boundary here,
CinderFixture's create_snapshot_force answers as cinder-api with the
extension does, through cinder_ext.guards itself and the fake Cinder's
fence record.
"""

from cinder import exception as cinder_exception
import fixtures
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.api import client

from cinder_ext import guards
from tests.nova.functional import base

ROOT = nova_fixtures.CinderFixture.IMAGE_BACKED_VOL


class _TypedVolume(object):
    """What cinder_ext's guard reads of a volume.

    Status, type, the fence marker (admin metadata) and attachments.
    """

    def __init__(self, volume: dict, mode: str, cinder: base.FakeFenceCinder,
                 attachment_id: str):
        self.id = volume['id']
        self.status = volume['status']
        self.attach_status = volume.get('attach_status')
        self.volume_type = {'extra_specs': {
            'cacheable': '<is> True', 'cas:cache_mode': mode}}
        marker = {guards.FENCE_KEY: cinder.fences.get(self.id),
                  guards.FENCE_EPOCH_KEY: cinder.epochs.get(self.id),
                  guards.FENCE_DRAINED_KEY: cinder.drained.get(self.id)}
        self.admin_metadata = {k: v for k, v in marker.items() if v}
        self.volume_attachment = [{'id': attachment_id}]


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
        #: what held when cinder-api was asked for each snapshot
        self.at_snapshot: list[dict] = []

        def create_snapshot_force(ctxt, volume_id, name, description):
            volume = fixture.fake_get(ctxt, volume_id)
            [core] = self.cores()
            self.at_snapshot.append({
                'dirty': self.dirty('compute1', core),
                'drained': self.drained_on('compute1'),
                'frozen': self.frozen,
                'marker_drained': dict(self.cinder.drained)})
            try:
                guards.refuse_if_dirty_capable(
                    _TypedVolume(volume, self.volumes[volume_id],
                                 self.cinder,
                                 self.attachment_of(volume_id)),
                    'snapshot', allow_drained=True)
            except cinder_exception.InvalidVolume as exc:
                # cinder-api's 400, as nova.volume.cinder translates it
                raise nova_exception.InvalidInput(reason=exc.msg)
            return original(ctxt, volume_id, name, description)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.volume.cinder.API.create_snapshot_force',
            lambda api, *args: create_snapshot_force(*args)))
        # nova's fake Domain freezes nothing: record what was asked
        self.frozen = False
        self.guest_calls: list[str] = []
        for name, frozen in (('fsFreeze', True), ('fsThaw', False)):
            self.useFixture(fixtures.MonkeyPatch(
                'nova.tests.fixtures.libvirt.Domain.' + name,
                lambda domain, *args, _name=name, _frozen=frozen:
                    self._guest_call(_name, _frozen)))

    def _guest_call(self, name: str, frozen: bool) -> None:
        self.guest_calls.append(name)
        self.frozen = frozen

    def attachment_of(self, volume_id: str) -> str:
        [bdm] = [b for b in objects.BlockDeviceMappingList.
                 get_by_instance_uuid(nova_context.get_admin_context(),
                                      self.server['id'])
                 if b.volume_id == volume_id]
        return bdm.attachment_id

    def boot_with_dirty_root(self, guest_agent: bool, dirty: int = 64
                             ) -> tuple[dict, object]:
        """A server on the wb ROOT volume, *dirty* blocks in its core."""
        server = self._build_server(image_uuid='', networks='none')
        server['block_device_mapping_v2'] = [{
            'boot_index': 0, 'uuid': ROOT, 'source_type': 'volume',
            'destination_type': 'volume'}]
        server = self.api.post_server({'server': server})
        self.server = self._wait_for_state_change(server, 'ACTIVE')
        if guest_agent:
            # what booting from a volume made of an image with
            # hw_qemu_guest_agent=yes records (CinderFixture fixes the
            # image metadata of its IMAGE_BACKED_VOL)
            instance = objects.Instance.get_by_uuid(
                nova_context.get_admin_context(), server['id'],
                expected_attrs=['system_metadata'])
            instance.system_metadata['image_hw_qemu_guest_agent'] = 'yes'
            instance.save()
        [core] = self.cores()
        self.assertEqual(2, core.cache_id)             # the wb instance
        self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return self.server, core

    def snapshot(self, server: dict) -> dict:
        return self.api.post_server_action(
            server['id'], {'createImage': {'name': 'backup-of-wb'}})

    def assert_write_back_kept(self, core, dirty: int) -> None:
        """The core caches writes again, its marker names compute1."""
        [still] = self.cores()
        self.assertEqual(core, still)
        self.assertEqual(dirty, self.dirty('compute1', core))
        self.assertEqual(set(), self.drained_on('compute1'))
        self.assertEqual({ROOT: 'compute1'}, self.cinder.fences)
        self.assertEqual(self.attachment_of(ROOT), self.cinder.epochs[ROOT])
        self.assertEqual({}, self.cinder.drained)
        self.assertFalse(self.frozen)

    def test_quiesced_snapshot_drains_the_write_back_volume(self):
        server, core = self.boot_with_dirty_root(guest_agent=True)
        image_id = self.snapshot(server)['image_id']
        # at the snapshot: frozen guest, core flushed and pinned, the
        # marker says its own attachment drained it
        self.assertEqual([{'dirty': 0, 'drained': {core.core_id},
                           'frozen': True,
                           'marker_drained': {
                               ROOT: self.attachment_of(ROOT)}}],
                         self.at_snapshot)
        [snapshot] = self.cinder_fixture.volume_snapshots.values()
        self.assertEqual(ROOT, snapshot['volume_id'])
        [mapping] = self.glance.show(None, image_id)['properties'][
            'block_device_mapping']
        self.assertEqual(snapshot['id'], mapping['snapshot_id'])
        # afterwards: thawed, write-back again, still owned here
        self.assertEqual(['fsFreeze', 'fsThaw'], self.guest_calls)
        self.assert_write_back_kept(core, 0)
        self.host.set_dirty(core.cache_id, core.core_id, 8)
        self.assertEqual(8, self.dirty('compute1', core))
        self._wait_for_state_change(server, 'ACTIVE')

    def test_unquiesced_snapshot_refused_before_any_image_exists(self):
        server, core = self.boot_with_dirty_root(guest_agent=False)
        images_before = set(self.glance.images)
        exc = self.assertRaises(client.OpenStackApiException,
                                self.snapshot, server)
        self.assertEqual(400, exc.response.status_code)
        self.assertIn('newest writes may not be in Ceph', str(exc))
        self.assertEqual(images_before, set(self.glance.images))
        self.assertEqual({}, dict(self.cinder_fixture.volume_snapshots))
        self.assertEqual([], self.guest_calls)
        self.assertEqual([{'dirty': 64, 'drained': set(), 'frozen': False,
                           'marker_drained': {}}], self.at_snapshot)
        self.assert_write_back_kept(core, 64)
        self._wait_for_state_change(server, 'ACTIVE')

    def test_failed_drain_fails_the_snapshot_and_keeps_write_back(self):
        server, core = self.boot_with_dirty_root(guest_agent=True)
        images_before = set(self.glance.images)
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core '
                                      'device\n')
        exc = self.assertRaises(client.OpenStackApiException,
                                self.snapshot, server)
        self.assertEqual(500, exc.response.status_code)
        self.assertIn('could not be drained for the snapshot',
                      self.stdlog.logger.output)
        # nova never got to cinder: no snapshot, no image
        self.assertEqual([], self.at_snapshot)
        self.assertEqual({}, dict(self.cinder_fixture.volume_snapshots))
        self.assertEqual(images_before, set(self.glance.images))
        # thawed by the driver as the drain failed, and once more by
        # nova's API, which unquiesces after any non-Nova error
        self.assertEqual(['fsFreeze', 'fsThaw', 'fsThaw'], self.guest_calls)
        self.assert_write_back_kept(core, 64)
        self._wait_for_state_change(server, 'ACTIVE')

    def test_host_that_cannot_drain_does_not_quiesce_and_is_refused(self):
        server, core = self.boot_with_dirty_root(guest_agent=True)
        # v22.6: a disabled IO class leaves overlapping dirty lines
        self.host.set_version('22.06.0.0705.release')
        exc = self.assertRaises(client.OpenStackApiException,
                                self.snapshot, server)
        self.assertEqual(400, exc.response.status_code)
        self.assertIn('newest writes may not be in Ceph', str(exc))
        self.assertIn('cannot be drained on this host',
                      self.stdlog.logger.output)
        # never frozen, nothing flushed, no snapshot or image
        self.assertEqual([], self.guest_calls)
        self.assertEqual([], self.host.calls(verb='flush-core'))
        self.assertEqual({}, dict(self.cinder_fixture.volume_snapshots))
        self.host.set_version(None)
        self.assert_write_back_kept(core, 64)
