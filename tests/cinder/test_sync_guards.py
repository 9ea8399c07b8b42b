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

"""Snapshots/backups of attached write-back volumes: 400 at the API.

Issue 13 (g): the driver's refusal came after the API's 202, so nova's
snapshot of a volume-backed server recorded an image pointing at an
errored snapshot. Real cinder DB and volume types; the extension's
pre-processing generator runs as cinder's wsgi layer runs it.
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
