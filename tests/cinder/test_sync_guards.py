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

"""Snapshots/backups/clones of volumes with dirty data: 400 at the API.

Issue 13 (g): the driver's refusal came after the API's 202, so nova's
snapshot of a volume-backed server recorded an image pointing at an
errored snapshot. Issue 32 (3): the marker, not the attach status, says
whether a host may hold such data (available volumes included). Real
cinder DB and volume types; the extension's pre-processing generator
runs as cinder's wsgi layer runs it.
"""

from cinder import context
from cinder.db import api as db
from cinder.tests.unit.api import fakes
from cinder.tests.unit import test
from cinder.tests.unit import utils
import ddt
import webob

from cinder_ext.api import sync_guards
from cinder_ext import guards


def _specs(mode):
    return {'cacheable': '<is> True', 'cas:cache_mode': mode} if mode else {}


@ddt.ddt
class SyncGuardTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()

    def volume(self, mode, status):
        vtype = utils.create_volume_type(
            self.admin, name='type-%s-%s' % (mode, status),
            extra_specs=_specs(mode))
        return utils.create_volume(self.admin, status=status,
                                   volume_type_id=vtype.id)

    def run_guard(self, controller, key, volume):
        req = fakes.HTTPRequest.blank('/v3/%s/%ss' % (fakes.FAKE_UUID, key),
                                      use_admin_context=True)
        steps = controller.create(req, body={key: {'volume_id': volume.id,
                                                   'force': True}})
        next(steps)      # cinder runs the controller only after this

    @ddt.data((sync_guards.SnapshotGuardController, 'snapshot'),
              (sync_guards.BackupGuardController, 'backup'))
    @ddt.unpack
    def test_in_use_write_back_refused_before_anything_is_created(
            self, controller_class, key):
        volume = self.volume('wb', 'in-use')
        exc = self.assertRaises(webob.exc.HTTPBadRequest, self.run_guard,
                                controller_class(), key, volume)
        self.assertIn('Drain it first', exc.explanation)

    @ddt.data(('wb', 'available'), ('wt', 'in-use'), (None, 'in-use'))
    @ddt.unpack
    def test_other_volumes_pass(self, mode, status):
        volume = self.volume(mode, status)
        for controller, key in (
                (sync_guards.SnapshotGuardController(), 'snapshot'),
                (sync_guards.BackupGuardController(), 'backup')):
            self.run_guard(controller, key, volume)
        self.run_clone_guard(volume)

    def run_clone_guard(self, source):
        """POST /volumes with *source* as source_volid (a clone)."""
        req = fakes.HTTPRequest.blank('/v3/%s/volumes' % fakes.FAKE_UUID,
                                      use_admin_context=True)
        steps = sync_guards.CloneGuardController().create(
            req, body={'volume': {'source_volid': source.id, 'size': 1}})
        next(steps)

    def mark(self, volume, host='compute-1', epoch='att-gone',
             drained_epoch=None):
        keys = {guards.FENCE_KEY: host, guards.FENCE_EPOCH_KEY: epoch}
        if drained_epoch:
            keys[guards.FENCE_DRAINED_KEY] = drained_epoch
        db.volume_admin_metadata_update(self.admin, volume.id, keys, False)

    def test_clone_of_attached_write_back_volume_refused_at_api(self):
        volume = self.volume('wb', 'in-use')
        exc = self.assertRaises(webob.exc.HTTPBadRequest,
                                self.run_clone_guard, volume)
        self.assertIn('cannot clone volume %s while it is attached'
                      % volume.id, exc.explanation)

    @ddt.data('wb', 'wo', 'wt', None)
    def test_available_volume_with_marker_refused_at_api(self, mode):
        """Issue 32 (3): the orphaned dirty core of a deleted server.

        The volume is available (its server was deleted while the host
        was down), its marker still names the host; a retyped volume
        (now wt or uncached) keeps the marker as well. Snapshot, backup
        and clone are refused, with what to do.
        """
        volume = self.volume(mode, 'available')
        self.mark(volume)
        for controller, key in (
                (sync_guards.SnapshotGuardController(), 'snapshot'),
                (sync_guards.BackupGuardController(), 'backup')):
            exc = self.assertRaises(webob.exc.HTTPBadRequest, self.run_guard,
                                    controller, key, volume)
            self.assert_says_what_to_do(exc.explanation, volume)
        exc = self.assertRaises(webob.exc.HTTPBadRequest,
                                self.run_clone_guard, volume)
        self.assert_says_what_to_do(exc.explanation, volume)

    def test_drained_flag_of_a_gone_attachment_does_not_allow(self):
        """A drain counts only for an attachment that still exists."""
        volume = self.volume('wb', 'available')
        self.mark(volume, drained_epoch='att-gone')
        exc = self.assertRaises(webob.exc.HTTPBadRequest, self.run_guard,
                                sync_guards.SnapshotGuardController(),
                                'snapshot', volume)
        self.assert_says_what_to_do(exc.explanation, volume)

    def test_cleared_marker_allows_again(self):
        volume = self.volume('wb', 'available')
        self.mark(volume)
        for key in (guards.FENCE_KEY, guards.FENCE_EPOCH_KEY):
            db.volume_admin_metadata_delete(self.admin, volume.id, key)
        self.run_guard(sync_guards.SnapshotGuardController(), 'snapshot',
                       volume)
        self.run_guard(sync_guards.BackupGuardController(), 'backup', volume)
        self.run_clone_guard(volume)

    def assert_says_what_to_do(self, message, volume):
        self.assertIn('its fence marker names host compute-1 (attachment '
                      'att-gone)', message)
        self.assertIn("'os-brick-cas recover --volume %s'" % volume.id,
                      message)
        self.assertIn("'os-brick-cas fence-clear %s --host-lost'"
                      % volume.id, message)


@ddt.ddt
class FencedVolumeGuardTestCase(test.TestCase):
    """Issue 13 point 4: retype/migrate/unmanage while a host is fenced."""

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()
        self.controller = sync_guards.FencedVolumeGuardController()

    def run_guard(self, method, volume):
        req = fakes.HTTPRequest.blank(
            '/v3/%s/volumes/%s/action' % (fakes.FAKE_UUID, volume.id),
            use_admin_context=True)
        next(getattr(self.controller, method)(req, volume.id, body={}))

    @ddt.data('_retype', '_migrate', '_unmanage')
    def test_refused_while_fenced_even_when_available(self, method):
        volume = utils.create_volume(self.admin, status='available')
        db.volume_admin_metadata_update(
            self.admin, volume.id, {guards.FENCE_KEY: 'compute-1'}, False)
        exc = self.assertRaises(webob.exc.HTTPBadRequest, self.run_guard,
                                method, volume)
        self.assertIn('host compute-1 may hold its newest writes',
                      exc.explanation)

    @ddt.data('_retype', '_migrate', '_unmanage')
    def test_allowed_without_marker(self, method):
        volume = utils.create_volume(self.admin, status='available')
        self.run_guard(method, volume)


class ShareOnlyRetypeGuardTestCase(test.TestCase):
    """Issue 35: a fenced volume's share may change in place."""

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()
        self.controller = sync_guards.FencedVolumeGuardController()
        share_10 = dict(_specs('wb'), **{'cas:cache_share': '10'})
        old = utils.create_volume_type(self.admin, name='wb-10',
                                       extra_specs=share_10)
        utils.create_volume_type(self.admin, name='wb-20', extra_specs=dict(
            _specs('wb'), **{'cas:cache_share': '20'}))
        utils.create_volume_type(self.admin, name='wt-10', extra_specs=dict(
            _specs('wt'), **{'cas:cache_share': '10'}))
        self.volume = utils.create_volume(self.admin, status='in-use',
                                          volume_type_id=old.id)
        db.volume_admin_metadata_update(
            self.admin, self.volume.id, {guards.FENCE_KEY: 'compute-1'},
            False)

    def retype(self, **request):
        req = fakes.HTTPRequest.blank(
            '/v3/%s/volumes/%s/action' % (fakes.FAKE_UUID, self.volume.id),
            use_admin_context=True)
        next(self.controller._retype(req, self.volume.id,
                                     body={'os-retype': request}))

    def test_share_only_change_that_cannot_migrate_passes(self):
        self.retype(new_type='wb-20')
        self.retype(new_type='wb-20', migration_policy='never')

    def test_share_only_change_that_may_migrate_refused(self):
        exc = self.assertRaises(webob.exc.HTTPBadRequest, self.retype,
                                new_type='wb-20',
                                migration_policy='on-demand')
        self.assertIn('host compute-1 may hold its newest writes',
                      exc.explanation)

    def test_mode_change_refused(self):
        self.assertRaises(webob.exc.HTTPBadRequest, self.retype,
                          new_type='wt-10')

    def test_unknown_type_left_to_cinder_refused_while_fenced(self):
        self.assertRaises(webob.exc.HTTPBadRequest, self.retype,
                          new_type='no-such-type')
