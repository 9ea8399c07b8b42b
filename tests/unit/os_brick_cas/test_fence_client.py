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

"""FenceClient's compare-and-swap, against Cinder's HTTP API.

requests-mock answers at the HTTP layer; cinderclient and keystoneauth1
above it are real.
"""

from cinderclient import client as cinder_client
from cinderclient import exceptions as cinder_exceptions
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from requests_mock.contrib import fixture as rm_fixture
import testtools

from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import fence_wire as wire

ENDPOINT = 'http://cinder.test/v3/project'
VOLUME = '6d54cb90-a5d1-40d8-9cb2-c6adf43a02af'
ACTION = ENDPOINT + '/volumes/%s/action' % VOLUME
ATT1 = '00000000-0000-0000-0000-0000000a7701'


def conflict(current):
    return {'status_code': 409, 'json': {'conflict': {
        'message': 'the fence marker changed', 'current': current}}}


class FenceClientCasTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.http = self.useFixture(rm_fixture.Fixture())
        self.client = fence.FenceClient(cinder_client.Client(
            '3', session=ks_session.Session(auth=token_endpoint.Token(
                ENDPOINT, 'admin-token'))))

    def sent(self):
        return self.http.request_history[-1].json()

    def show(self, host=None, epoch=None, drained=None):
        return {'json': {'volume': {
            'id': VOLUME, wire.ATTRIBUTE: host,
            wire.EPOCH_ATTRIBUTE: epoch, wire.LOST_ATTRIBUTE: '',
            wire.DRAINED_ATTRIBUTE: drained}}}

    def test_expect_goes_on_the_wire_only_when_given(self):
        self.http.post(ACTION, status_code=202)
        self.client.set(VOLUME, 'cmp1', ATT1)
        self.assertEqual({wire.SET_ACTION: {'host': 'cmp1',
                                            'epoch': ATT1}}, self.sent())
        self.client.set(VOLUME, 'cmp1', ATT1, drained=True, expect=None)
        self.assertEqual({wire.SET_ACTION: {
            'host': 'cmp1', 'epoch': ATT1, 'drained': True,
            'expect': None}}, self.sent())
        self.client.clear(VOLUME, lost=True,
                          expect=fence.Owner('cmp1', ATT1, True))
        self.assertEqual({wire.CLEAR_ACTION: {
            'lost': True, 'expect': {'host': 'cmp1', 'epoch': ATT1,
                                     'drained': True}}}, self.sent())
        self.client.clear(VOLUME)
        self.assertEqual({wire.CLEAR_ACTION: {}}, self.sent())

    def test_409_is_a_fence_conflict_with_the_current_record(self):
        self.http.post(ACTION, **conflict(
            {'host': 'cmp2', 'epoch': ATT1, 'drained': False}))
        exc = self.assertRaises(exception.FenceConflict, self.client.set,
                                VOLUME, 'cmp1', ATT1, expect=None)
        self.assertEqual(fence.Owner('cmp2', ATT1, False), exc.current)
        self.assertIn('expected no marker', str(exc))
        self.assertIn('Cinder holds the marker naming host cmp2, '
                      'attachment %s' % ATT1, str(exc))
        self.assertIn(VOLUME, str(exc))

    def test_409_of_a_clear_when_there_is_no_marker(self):
        self.http.post(ACTION, **conflict(None))
        exc = self.assertRaises(exception.FenceConflict, self.client.clear,
                                VOLUME, expect=fence.Owner('cmp1', ATT1))
        self.assertIsNone(exc.current)
        self.assertIn('expected the marker naming host cmp1', str(exc))
        self.assertIn('Cinder holds no marker', str(exc))

    def test_other_409_is_not_mistaken_for_a_conflict_on_the_marker(self):
        self.http.post(ACTION, status_code=409, json={
            'conflictingRequest': {'message': 'busy', 'code': 409}})
        exc = self.assertRaises(cinder_exceptions.ClientException,
                                self.client.set, VOLUME, 'cmp1',
                                expect=None)
        self.assertNotIsInstance(exc, exception.FenceConflict)
        self.assertEqual(409, exc.code)

    def test_take_swaps_on_what_it_read_and_rereads_on_conflict(self):
        """A host that takes a free marker loses to one that was faster."""
        self.http.get(ENDPOINT + '/volumes/' + VOLUME,
                      [self.show(), self.show('cmp2', ATT1)])
        self.http.post(ACTION, **conflict(
            {'host': 'cmp2', 'epoch': ATT1, 'drained': False}))
        other = self.client.take(VOLUME, 'cmp1', 'att-new')
        self.assertEqual(fence.Owner('cmp2', ATT1), other)
        posts = [r for r in self.http.request_history if r.method == 'POST']
        self.assertEqual([None], [r.json()[wire.SET_ACTION]['expect']
                                  for r in posts])

    def test_take_of_its_own_marker_expects_it(self):
        self.http.get(ENDPOINT + '/volumes/' + VOLUME,
                      **self.show('cmp1', ATT1, ATT1))
        self.http.post(ACTION, status_code=202)
        self.assertIsNone(self.client.take(VOLUME, 'cmp1', ATT1))
        # undrains its own drained marker: expects exactly that record
        self.assertEqual({wire.SET_ACTION: {
            'host': 'cmp1', 'epoch': ATT1, 'expect': {
                'host': 'cmp1', 'epoch': ATT1, 'drained': True}}},
            self.sent())
