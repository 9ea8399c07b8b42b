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

"""Compare-and-swap on the fence marker (issue 21 point 2).

Two writers that read the same marker and change it cannot both win, as
with cinder's conditional_update of a volume's status. cinder's API test
base with its real DB and its real tooz coordinator (file locks), the
extension's controller as cinder's wsgi layer calls it.
"""

import functools
import json
import threading
from unittest import mock

from cinder import context
from cinder import coordination
from cinder.db import api as db
from cinder.tests.unit.api import fakes
from cinder.tests.unit import fake_constants as fake
from cinder.tests.unit import test
from cinder.tests.unit import utils
from cinderclient import client as cinder_client
import ddt
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import requests_mock
from requests_mock.contrib import fixture as rm_fixture
import webob

from cinder_ext.api import fence
from cinder_ext import guards
from os_brick_cas import exception as exception_mod
from os_brick_cas import fence as os_fence
from os_brick_cas import fence_wire as wire

ATT1 = '00000000-0000-0000-0000-0000000a7701'
ATT2 = '00000000-0000-0000-0000-0000000a7702'
ENDPOINT = 'http://cinder.test/v3/%s' % fake.PROJECT_ID


def expect(host, epoch=None, drained=False):
    return {'host': host, 'epoch': epoch, 'drained': drained}


@ddt.ddt
class FenceCasTestCase(test.TestCase):

    #: the real coordinator: cinder's file locks under the test's lock_path
    MOCK_TOOZ = False

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()
        self.volume = utils.create_volume(self.admin)
        self.controller = fence.FenceController()

    def request(self):
        return fakes.HTTPRequest.blank(
            '/v3/%s/volumes/%s/action' % (fakes.FAKE_UUID, self.volume.id),
            use_admin_context=True)

    def set(self, **params):
        return self.controller._set_fence(self.request(), self.volume.id,
                                          {wire.SET_ACTION: params})

    def clear(self, **params):
        return self.controller._clear_fence(self.request(), self.volume.id,
                                            {wire.CLEAR_ACTION: params})

    def marker(self):
        return guards.Marker.parse(db.volume_admin_metadata_get(
            self.admin, self.volume.id)).record()

    def test_two_racing_takers_of_a_free_marker_one_wins(self):
        """Both read "no marker"; each tries to name its own host.

        The first reader waits (up to a second) for the other to read too:
        without the lock both read the same record and both would win.
        """
        read_marker = guards.read_marker
        both_read = threading.Barrier(2, timeout=1)

        def slow_read(volume):
            marker = read_marker(volume)
            try:
                # let the other writer read while this one holds the lock
                both_read.wait()
            except threading.BrokenBarrierError:
                pass    # it could not: it waits for the lock
            return marker

        answers = {}

        def take(host):
            answers[host] = self.set(host=host, epoch=ATT1, expect=None)

        with mock.patch.object(guards, 'read_marker', slow_read):
            threads = [threading.Thread(target=take, args=(host,))
                       for host in ('cmp1', 'cmp2')]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
        statuses = sorted(answer.status_int for answer in answers.values())
        self.assertEqual([202, 409], statuses, answers)
        [winner] = [host for host, answer in answers.items()
                    if answer.status_int == 202]
        [loser] = [answer for answer in answers.values()
                   if answer.status_int == 409]
        self.assertEqual(expect(winner, ATT1), self.marker())
        self.assertEqual(expect(winner, ATT1),
                         loser.json_body['conflict']['current'])

    def test_lock_held_elsewhere_is_waited_for_a_bounded_time(self):
        """Another cinder-api worker holds the volume's lock."""
        self.mock_object(fence, 'LOCK_TIMEOUT', 0.2)
        lock = coordination.COORDINATOR.get_lock(
            fence.LOCK_NAME % self.volume.id)
        self.assertTrue(lock.acquire())
        try:
            exc = self.assertRaises(webob.exc.HTTPServiceUnavailable,
                                    self.set, host='cmp1', expect=None)
            self.assertIn('nothing was changed', str(exc))
            self.assertIsNone(self.marker())
        finally:
            lock.release()
        self.assertEqual(202, self.set(host='cmp1', expect=None).status_int)

    def test_409_names_what_cinder_holds_and_changes_nothing(self):
        self.set(host='cmp1', epoch=ATT1, drained=True)
        answer = self.set(host='cmp2', epoch=ATT2, expect=None)
        self.assertEqual(409, answer.status_int)
        self.assertEqual('application/json', answer.content_type)
        body = json.loads(answer.body)
        self.assertEqual(expect('cmp1', ATT1, True),
                         body['conflict']['current'])
        self.assertIn(self.volume.id, body['conflict']['message'])
        self.assertEqual(expect('cmp1', ATT1, True), self.marker())
        # undrained by another host's view of it: also refused
        answer = self.set(host='cmp1', epoch=ATT1,
                          expect=expect('cmp1', ATT1, False))
        self.assertEqual(409, answer.status_int)
        self.assertEqual(expect('cmp1', ATT1, True), self.marker())

    def test_expected_record_is_swapped(self):
        self.assertEqual(202, self.set(host='cmp1', epoch=ATT1,
                                       expect=None).status_int)
        self.assertEqual(202, self.set(
            host='cmp1', epoch=ATT1, drained=True,
            expect=expect('cmp1', ATT1)).status_int)
        # a drained marker taken over by the destination
        self.assertEqual(202, self.set(
            host='cmp2', epoch=ATT2,
            expect=expect('cmp1', ATT1, True)).status_int)
        self.assertEqual(expect('cmp2', ATT2), self.marker())
        # an epoch-less marker (set before epochs were recorded)
        self.set(host='cmp3')
        self.assertEqual(202, self.clear(expect=expect('cmp3')).status_int)
        self.assertIsNone(self.marker())
        # "no marker" spelled as a record with a null host
        self.assertEqual(202, self.set(host='cmp1', expect=expect(
            None)).status_int)

    def test_clear_with_a_stale_expect_refused(self):
        self.set(host='cmp2', epoch=ATT2)
        for stale in (expect('cmp1', ATT1), expect('cmp2', ATT1),
                      expect('cmp2', ATT2, True), None):
            answer = self.clear(lost=True, expect=stale)
            self.assertEqual(409, answer.status_int, stale)
            self.assertEqual(expect('cmp2', ATT2),
                             answer.json_body['conflict']['current'])
        self.assertEqual(expect('cmp2', ATT2), self.marker())
        self.assertEqual((), guards.Marker.parse(db.volume_admin_metadata_get(
            self.admin, self.volume.id)).lost)
        self.assertEqual(202, self.clear(
            lost=True, expect=expect('cmp2', ATT2)).status_int)
        self.assertIsNone(self.marker())
        # a clear that expects a marker when there is none
        answer = self.clear(expect=expect('cmp2', ATT2))
        self.assertEqual(409, answer.status_int)
        self.assertIsNone(answer.json_body['conflict']['current'])

    def test_without_expect_the_change_is_unconditional(self):
        """What compute hosts older than compare-and-swap send."""
        self.set(host='cmp1', epoch=ATT1)
        self.assertEqual(202, self.set(host='cmp2', epoch=ATT2).status_int)
        self.assertEqual(expect('cmp2', ATT2), self.marker())
        self.assertEqual(202, self.clear().status_int)
        self.assertIsNone(self.marker())

    @ddt.data('cmp1', 42, [], {}, {'host': 'cmp1'},
              {'host': 'cmp1', 'epoch': None},
              dict(expect('cmp1'), extra=1),
              expect('cmp1', None, True),
              expect('cmp1', ATT1, 'yes'),
              expect('cmp1', 'a b'),
              expect('cmp 1'),
              expect(7),
              expect(None, ATT1),
              expect(None, None, True))
    def test_bad_expect_refused(self, bad):
        self.set(host='cmp1', epoch=ATT1)
        for action in (self.set, self.clear):
            params = {'expect': bad}
            if action == self.set:
                params.update(host='cmp2')
            exc = self.assertRaises(webob.exc.HTTPBadRequest, action,
                                    **params)
            self.assertIn("'expect' is null (no marker) or", str(exc))
        self.assertEqual(expect('cmp1', ATT1), self.marker())

    def test_body_that_is_not_an_object_refused(self):
        for body in ('cmp1', ['cmp1']):
            self.assertRaises(
                webob.exc.HTTPBadRequest, self.controller._set_fence,
                self.request(), self.volume.id, {wire.SET_ACTION: body})


class FenceClientThroughCinderApiTestCase(test.TestCase):
    """os_brick_cas's FenceClient against cinder's own v3 WSGI stack.

    cinderclient's HTTP requests are answered by cinder's API router with
    the extension loaded from ``osapi_volume_extension``, as cinder-api
    runs it: the wire format of ``expect`` and of the 409 is one contract
    on both sides.
    """

    MOCK_TOOZ = False

    def setUp(self):
        super().setUp()
        self.flags(osapi_volume_extension=[
            'cinder.api.contrib.standard_extensions',
            'cinder_ext.api.fence.Fence'])
        # nova-compute's service user: not a cloud admin
        service = context.RequestContext(
            fake.USER_ID, fake.PROJECT_ID, auth_token=True,
            roles=['service', 'member', 'reader'])
        app = fakes.wsgi_app(fake_auth_context=service)
        http = self.useFixture(rm_fixture.Fixture())
        http.register_uri(requests_mock.ANY, requests_mock.ANY,
                          text=functools.partial(self._wsgi, app))
        self.volume = utils.create_volume(
            service, volume_type_id=utils.create_volume_type(
                context.get_admin_context(), name='plain').id)
        self.client = os_fence.FenceClient(cinder_client.Client(
            '3', session=ks_session.Session(auth=token_endpoint.Token(
                ENDPOINT, 'service-token'))))

    @staticmethod
    def _wsgi(app, request, answer):
        body = request.body or b''
        req = webob.Request.blank(
            request.url[len('http://cinder.test'):],
            method=request.method,
            body=body.encode() if isinstance(body, str) else body,
            headers={'Content-Type': 'application/json'})
        response = req.get_response(app)
        answer.status_code = response.status_int
        answer.headers['Content-Type'] = response.content_type
        return response.text

    def test_racing_clients_one_wins_the_other_learns_who(self):
        client = self.client
        client.set(self.volume.id, 'cmp1', ATT1, expect=None)
        exc = self.assertRaises(exception_mod.FenceConflict, client.set,
                                self.volume.id, 'cmp2', ATT2, expect=None)
        self.assertEqual(os_fence.Owner('cmp1', ATT1), exc.current)
        self.assertEqual(os_fence.Owner('cmp1', ATT1),
                         client.owner(self.volume.id))
        # the owner drains, then a destination takes the drained marker
        client.set(self.volume.id, 'cmp1', ATT1, drained=True,
                   expect=os_fence.Owner('cmp1', ATT1))
        client.set(self.volume.id, 'cmp2', ATT2,
                   expect=os_fence.Owner('cmp1', ATT1, True))
        exc = self.assertRaises(exception_mod.FenceConflict, client.clear,
                                self.volume.id,
                                expect=os_fence.Owner('cmp1', ATT1, True))
        self.assertEqual(os_fence.Owner('cmp2', ATT2), exc.current)
        client.clear(self.volume.id, lost=True,
                     expect=os_fence.Owner('cmp2', ATT2))
        self.assertEqual((None, [os_fence.Owner('cmp2', ATT2)]),
                         client.record(self.volume.id))

    def test_take_does_not_overwrite_another_hosts_marker(self):
        self.client.set(self.volume.id, 'cmp1', ATT1)
        self.assertEqual(os_fence.Owner('cmp1', ATT1),
                         self.client.take(self.volume.id, 'cmp2', ATT2))
        self.assertIsNone(self.client.take(self.volume.id, 'cmp1', ATT2))
        self.assertEqual(os_fence.Owner('cmp1', ATT2),
                         self.client.owner(self.volume.id))
