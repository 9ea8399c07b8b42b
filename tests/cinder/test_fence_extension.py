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

"""The fence marker API extension on cinder's API test base (real DB)."""

from cinder.api.openstack import wsgi
from cinder import context
from cinder.db import api as db
from cinder import objects
from cinder import policy as cinder_policy
from cinder.tests.unit.api import fakes
from cinder.tests.unit import test
from cinder.tests.unit import utils
from oslo_policy import policy as oslo_policy
import webob

from cinder_ext.api import fence
from cinder_ext import guards
from cinder_ext import policies
from os_brick_cas import fence_wire as wire
from tests.cinder import compat as cinder_test_compat


class FenceExtensionTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()
        self.volume = utils.create_volume(self.admin)
        self.controller = fence.FenceController()

    def request(self, admin=True):
        return fakes.HTTPRequest.blank(
            '/v3/%s/volumes/%s/action' % (fakes.FAKE_UUID, self.volume.id),
            use_admin_context=admin)

    def admin_metadata(self):
        return db.volume_admin_metadata_get(self.admin, self.volume.id)

    def test_set_and_clear(self):
        response = self.controller._set_fence(
            self.request(), self.volume.id,
            {wire.SET_ACTION: {'host': 'compute-1', 'epoch': 'att-1'}})
        self.assertEqual(202, response.status_int)
        self.assertEqual('compute-1',
                         self.admin_metadata()[guards.FENCE_KEY])
        # the driver sees it on the volume object cinder hands it
        volume = objects.Volume.get_by_id(self.admin, self.volume.id)
        self.assertEqual('compute-1', guards.read_marker(volume).host)
        self.assertEqual('att-1', guards.read_marker(volume).epoch)
        self.controller._clear_fence(self.request(), self.volume.id,
                                     {wire.CLEAR_ACTION: {}})
        self.assertNotIn(guards.FENCE_KEY, self.admin_metadata())
        self.assertNotIn(guards.FENCE_EPOCH_KEY, self.admin_metadata())
        # clearing twice is fine
        self.controller._clear_fence(self.request(), self.volume.id,
                                     {wire.CLEAR_ACTION: {}})

    def test_drained_flag_names_one_attachment(self):
        """Set with drained, it names the epoch; set again drops it."""
        self.controller._set_fence(
            self.request(), self.volume.id,
            {wire.SET_ACTION: {'host': 'compute-1', 'epoch': 'att-1',
                               'drained': True}})
        self.assertEqual('att-1',
                         self.admin_metadata()[guards.FENCE_DRAINED_KEY])
        self.controller._set_fence(
            self.request(), self.volume.id,
            {wire.SET_ACTION: {'host': 'compute-2', 'epoch': 'att-2'}})
        self.assertNotIn(guards.FENCE_DRAINED_KEY, self.admin_metadata())
        self.controller._set_fence(
            self.request(), self.volume.id,
            {wire.SET_ACTION: {'host': 'compute-2', 'epoch': 'att-2',
                               'drained': True}})
        self.controller._clear_fence(self.request(), self.volume.id,
                                     {wire.CLEAR_ACTION: {}})
        self.assertNotIn(guards.FENCE_DRAINED_KEY, self.admin_metadata())
        # drained without an epoch says nothing about which attachment
        for bad in ({'host': 'compute-1', 'drained': True},
                    {'host': 'compute-1', 'epoch': 'att-1',
                     'drained': 'yes'}):
            self.assertRaises(webob.exc.HTTPBadRequest,
                              self.controller._set_fence, self.request(),
                              self.volume.id, {wire.SET_ACTION: bad})

    def request_as(self, roles, admin=False):
        return cinder_test_compat.request(
            '/v3/%s/volumes/%s/action' % (fakes.FAKE_UUID, self.volume.id),
            roles, admin)

    def set_and_clear(self, req):
        self.controller._set_fence(req, self.volume.id,
                                   {wire.SET_ACTION: {'host': 'x'}})
        self.assertEqual('x', self.admin_metadata()[guards.FENCE_KEY])
        self.controller._clear_fence(req, self.volume.id,
                                     {wire.CLEAR_ACTION: {}})
        self.assertNotIn(guards.FENCE_KEY, self.admin_metadata())

    def test_owner_cannot_set_or_clear(self):
        for action, body, rule in (
                (self.controller._set_fence,
                 {wire.SET_ACTION: {'host': 'x'}}, policies.SET),
                (self.controller._clear_fence,
                 {wire.CLEAR_ACTION: {}}, policies.CLEAR)):
            exc = self.assertRaises(webob.exc.HTTPForbidden, action,
                                    self.request(admin=False),
                                    self.volume.id, body)
            self.assertIn('Policy %s does not allow' % rule, str(exc))
        self.assertNotIn(guards.FENCE_KEY, self.admin_metadata())

    def test_clear_as_lost_records_the_owner(self):
        for epoch in ('att-1', 'att-2'):
            self.controller._set_fence(
                self.request(), self.volume.id,
                {wire.SET_ACTION: {'host': 'compute-1', 'epoch': epoch}})
            self.controller._clear_fence(
                self.request(), self.volume.id,
                {wire.CLEAR_ACTION: {'lost': True}})
        volume = objects.Volume.get_by_id(self.admin, self.volume.id)
        self.assertEqual(('compute-1/att-1', 'compute-1/att-2'),
                         guards.read_marker(volume).lost)
        # a clean detach's clear records nothing
        self.controller._set_fence(
            self.request(), self.volume.id,
            {wire.SET_ACTION: {'host': 'compute-2', 'epoch': 'att-3'}})
        self.controller._clear_fence(self.request(), self.volume.id,
                                     {wire.CLEAR_ACTION: {}})
        volume = objects.Volume.get_by_id(self.admin, self.volume.id)
        self.assertEqual(2, len(guards.read_marker(volume).lost))
        self.assertRaises(webob.exc.HTTPBadRequest,
                          self.controller._clear_fence, self.request(),
                          self.volume.id, {wire.CLEAR_ACTION: {
                              'lost': 'yes'}})

    def test_service_role_may_set_and_clear(self):
        # nova-compute's service user: role service, not an admin
        self.set_and_clear(self.request_as(['service', 'member']))

    def test_policy_file_overrides_the_default(self):
        fence.register_policies()
        self.addCleanup(cinder_policy.reset)
        cinder_policy.set_rules(oslo_policy.Rules.from_dict({
            policies.SET: 'role:cas-operator',
            policies.CLEAR: 'role:cas-operator',
            policies.SHOW: '!'}), overwrite=False)
        self.assertRaises(webob.exc.HTTPForbidden,
                          self.controller._set_fence, self.request(),
                          self.volume.id, {wire.SET_ACTION: {'host': 'x'}})
        self.set_and_clear(self.request_as(['cas-operator', 'member']))
        db.volume_admin_metadata_update(
            self.admin, self.volume.id, {guards.FENCE_KEY: 'compute-9'},
            False)
        self.assertIsNone(self.show(self.request())[wire.ATTRIBUTE])

    def test_rules_registered_with_documented_defaults(self):
        fence.register_policies()
        registered = cinder_policy._ENFORCER.registered_rules
        for name in (policies.SET, policies.CLEAR, policies.SHOW):
            self.assertEqual('rule:admin_api or role:service',
                             registered[name].check_str)

    def test_bad_host_refused(self):
        for host in (None, '', 'a b', 'x;reboot', 42):
            self.assertRaises(webob.exc.HTTPBadRequest,
                              self.controller._set_fence, self.request(),
                              self.volume.id, {wire.SET_ACTION: {
                                  'host': host}})
        for epoch in (None, 'a b', '../x', 'x' * 65, 7):
            self.assertRaises(webob.exc.HTTPBadRequest,
                              self.controller._set_fence, self.request(),
                              self.volume.id, {wire.SET_ACTION: {
                                  'host': 'compute-1', 'epoch': epoch}})

    def show(self, req):
        req.cache_db_volume(objects.Volume.get_by_id(self.admin,
                                                     self.volume.id))
        body = {'volume': {'id': self.volume.id}}
        self.controller.show(req, wsgi.ResponseObject(body), self.volume.id)
        return {wire.ATTRIBUTE: body['volume'].get(wire.ATTRIBUTE)}

    def test_show_attribute_for_admins_and_services_only(self):
        db.volume_admin_metadata_update(
            self.admin, self.volume.id, {guards.FENCE_KEY: 'compute-9'},
            False)
        for req, expected in (
                (self.request(True), 'compute-9'),
                (self.request_as(['service', 'member']), 'compute-9'),
                (self.request(False), None)):
            self.assertEqual(expected, self.show(req)[wire.ATTRIBUTE],
                             req.environ["cinder.context"].roles)
