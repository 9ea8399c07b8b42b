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

"""The fence marker's guards for requests made with a user's token.

Issue 21 point 5: cinder loads a volume's admin metadata (where the
marker lives) only for admin contexts, so the guards saw no marker on a
user's request: a user's retype of a fenced volume passed, an attach made
with the user's token passed the fence check, and the documented quiesced
snapshot of a drained volume was refused. Real cinder DB, the volume
objects as cinder loads them for that user, the extension's API code and
the RBD driver (rados mocked).
"""

import functools
from unittest import mock
import uuid

from cinder.api.openstack import wsgi
from cinder import context
from cinder.db import api as db
from cinder import exception
from cinder import objects
from cinder.tests.unit import fake_constants as fake
from cinder.tests.unit import test
from cinder.tests.unit import utils
from cinder.tests.unit.volume.drivers import test_rbd
from cinder.volume.drivers import rbd as cinder_rbd
import ddt
from oslo_config import cfg
from oslo_utils import importutils
import webob

from cinder_ext.api import fence
from cinder_ext.api import sync_guards
from cinder_ext import guards
from cinder_ext import rbd
from os_brick_cas import fence_wire as wire
from tests.cinder import compat as cinder_test_compat

WB = {'cacheable': '<is> True', 'cas:cache_mode': 'wb'}


@ddt.ddt
class UserContextTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()
        # the volume's owner, as keystonemiddleware hands cinder its token
        self.user = context.RequestContext(
            fake.USER_ID, fake.PROJECT_ID, is_admin=False,
            roles=['member', 'reader'])

    def volume(self, status='in-use', drained=False):
        """The user's wb volume, fenced by cmp1's attachment."""
        self.attachment_id = str(uuid.uuid4())
        vtype = utils.create_volume_type(
            self.admin, name='wb-%s' % uuid.uuid4(), extra_specs=WB)
        marker = {guards.FENCE_KEY: 'cmp1',
                  guards.FENCE_EPOCH_KEY: self.attachment_id}
        if drained:
            marker[guards.FENCE_DRAINED_KEY] = self.attachment_id
        volume = utils.create_volume(
            self.user, status=status, volume_type_id=vtype.id,
            admin_metadata=marker)
        db.volume_attach(self.admin, {
            'id': self.attachment_id, 'volume_id': volume.id,
            'attached_host': 'cmp1', 'attach_status': 'attached'})
        return volume

    def user_request(self, path='volumes', roles=('member', 'reader')):
        return cinder_test_compat.request(
            '/v3/%s/%s' % (fake.PROJECT_ID, path), list(roles))

    def driver(self):
        rados = mock.MagicMock()
        # librados answers a str (cinder 26, 2025.1, decodes it)
        rados.Rados.return_value.get_fsid.return_value = str(uuid.uuid4())
        driver = rbd.CachedRBDDriver(
            execute=mock.Mock(return_value=('', '')),
            configuration=test_rbd.RBDTestCase._make_configuration(),
            rbd=mock.MagicMock(), rados=rados)
        driver._active_config = {'name': 'ceph', 'user': 'cinder',
                                 'conf': '/etc/ceph/ceph.conf',
                                 'secret_uuid': 'uuid'}
        driver.set_initialized()
        self.patch('cinder.volume.drivers.rbd.RBDDriver._get_mon_addrs',
                   return_value=(['127.0.0.1'], ['6789']))
        return driver

    @ddt.data('_retype', '_migrate', '_unmanage')
    def test_user_request_on_fenced_volume_refused(self, action):
        volume = self.volume(status='available')
        steps = getattr(sync_guards.FencedVolumeGuardController(), action)(
            self.user_request('volumes/%s/action' % volume.id), volume.id,
            body={})
        exc = self.assertRaises(webob.exc.HTTPBadRequest, next, steps)
        self.assertIn('host cmp1 may hold its newest writes',
                      exc.explanation)

    def test_user_attach_on_another_host_refused(self):
        """The volume as cinder-volume gets it for the user's attachment."""
        volume = objects.Volume.get_by_id(self.user, self.volume().id)
        driver = self.driver()
        exc = self.assertRaises(exception.InvalidVolume,
                                driver.initialize_connection, volume,
                                {'host': 'cmp2'})
        self.assertIn('Open CAS cache of host cmp1', str(exc))
        # the fenced host itself reconnects (reboot, re-attach)
        info = driver.initialize_connection(volume, {'host': 'cmp1'})
        self.assertEqual('wb', info['data']['cache_mode'])

    def test_user_attachment_update_on_another_host_refused(self):
        """cinder-volume's attachment_update, as nova calls it for a user.

        The volume object is the one cinder-api loaded for the user's
        request and sent over RPC.
        """
        volume = objects.Volume.get_by_id(self.user, self.volume().id)
        manager = importutils.import_object(cfg.CONF.volume_manager)
        self.mock_object(manager, '_driver_shares_targets',
                         return_value=False)
        self.mock_object(manager, '_notify_about_volume_usage')
        manager.driver = self.driver()
        for host, refused in (('cmp2', True), ('cmp1', False)):
            attachment = db.volume_attach(self.admin, {
                'volume_id': volume.id, 'attach_status': 'reserved',
                'instance_uuid': fake.INSTANCE_ID, 'attach_mode': 'rw'})
            update = functools.partial(
                manager.attachment_update, self.user, volume,
                {'host': host}, attachment.id)
            if refused:
                exc = self.assertRaises(
                    exception.VolumeBackendAPIException, update)
                self.assertIn('Open CAS cache of host cmp1', str(exc))
            else:
                self.assertEqual('wb', update()['cache_mode'])

    @ddt.data((sync_guards.SnapshotGuardController, 'snapshot'),
              (sync_guards.BackupGuardController, 'backup'))
    @ddt.unpack
    def test_user_snapshot_of_drained_volume_allowed(self, controller,
                                                     key):
        """The documented quiesced snapshot, asked with the user's token.

        Refused as long as the attachment has not drained the volume.
        """
        for drained in (False, True):
            volume = self.volume(drained=drained)
            steps = controller().create(self.user_request(key + 's'), body={
                key: {'volume_id': volume.id, 'force': True}})
            if drained:
                next(steps)     # cinder's own controller runs next
            else:
                exc = self.assertRaises(webob.exc.HTTPBadRequest, next,
                                        steps)
                self.assertIn('Drain it first', exc.explanation)

    def test_user_snapshot_of_drained_volume_reaches_ceph(self):
        """And cinder-volume's driver takes it, for the user's snapshot."""
        volume = self.volume(drained=True)
        snapshot = utils.create_snapshot(self.user, volume.id)
        snapshot = objects.Snapshot.get_by_id(self.user, snapshot.id)
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'create_snapshot') as create:
            self.driver().create_snapshot(snapshot)
        create.assert_called_once_with(snapshot)

    def test_user_cannot_set_clear_or_see_the_marker(self):
        volume = self.volume()
        controller = fence.FenceController()
        path = 'volumes/%s/action' % volume.id
        for action, body in (
                (controller._set_fence, {wire.SET_ACTION: {
                    'host': 'cmp9', 'expect': None}}),
                (controller._clear_fence, {wire.CLEAR_ACTION: {}})):
            self.assertRaises(webob.exc.HTTPForbidden, action,
                              self.user_request(path), volume.id, body)
        self.assertEqual('cmp1', db.volume_admin_metadata_get(
            self.admin, volume.id)[guards.FENCE_KEY])
        for method, req in (('show', self.user_request(path)),
                            ('detail', self.user_request('volumes/detail'))):
            body = self.show(controller, method, req, volume.id)
            for attribute in (wire.ATTRIBUTE, wire.EPOCH_ATTRIBUTE,
                              wire.DRAINED_ATTRIBUTE,
                              wire.LOST_ATTRIBUTE):
                self.assertNotIn(attribute, body)
        # nor through cinder's own view of the volume
        self.assertNotIn(guards.FENCE_KEY, str(db.volume_get(
            self.user, volume.id).get('volume_metadata')))

    def show(self, controller, method, req, volume_id):
        """Run the extension's show/detail on the volume *req* loaded."""
        req.cache_db_volume(objects.Volume.get_by_id(
            req.environ['cinder.context'], volume_id))
        volume = {'id': volume_id}
        if method == 'show':
            controller.show(req, wsgi.ResponseObject({'volume': volume}),
                            volume_id)
        else:
            controller.detail(req, wsgi.ResponseObject({
                'volumes': [volume]}))
        return volume

    def test_service_user_sees_the_marker(self):
        """nova-compute's service user (role service, not admin)."""
        volume = self.volume(drained=True)
        req = self.user_request('volumes/%s' % volume.id,
                                roles=('service', 'member'))
        body = self.show(fence.FenceController(), 'show', req, volume.id)
        self.assertEqual(('cmp1', self.attachment_id, self.attachment_id),
                         (body[wire.ATTRIBUTE], body[wire.EPOCH_ATTRIBUTE],
                          body[wire.DRAINED_ATTRIBUTE]))
