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

"""Cinder's API extension and the host library agree on the marker's strings.

Whatever host name or attachment epoch one end accepts, the other accepts
too, and what one refuses the other refuses: the API (a 400) and the
host library (:class:`InvalidInput` from validation, before anything is
sent or recorded) take the patterns from :mod:`os_brick_cas.fence_wire`.
"""

import uuid

from cinder import context
from cinder.tests.unit.api import fakes
from cinder.tests.unit import test
from cinder.tests.unit import utils
import hypothesis
from hypothesis import strategies as st
from oslo_utils import uuidutils
import webob

from cinder_ext.api import fence as api_fence
from os_brick_cas import exception
from os_brick_cas import fence as host_fence
from os_brick_cas import fence_wire as wire
from os_brick_cas import validation

#: strings either end might meet: ids Cinder makes, and near misses
EPOCHS = (uuidutils.generate_uuid(), str(uuid.uuid4()).upper(), 'att-1',
          'a', 'x' * 64, 'x' * 65, '', '-att', '--help', 'att_1', 'a b',
          '../x', 'att\n', 'att-1,b', 'a/b', '.x', 'é')
HOSTS = ('compute-1', 'cmp1.example.org', 'host@backend', 'fe80::1',
         'node_2', 'h' * 255, 'h' * 256, '', 'a b', 'x;reboot', 'a/b',
         'a,b', 'host\n', 'é')
#: characters near the patterns' edges (one of each class and separator)
EDGE_TEXT = st.text(alphabet='aZ09-_.:@/, \n\x00é', max_size=70)


def host_library_accepts(check, value) -> bool:
    try:
        check(value)
    except exception.InvalidInput:
        return False
    return True


def api_accepts_expect(host, epoch) -> bool:
    """The API's reading of ``expect`` (the compare-and-swap record)."""
    try:
        api_fence._expected({'expect': {'host': host, 'epoch': epoch,
                                        'drained': False}})
    except webob.exc.HTTPBadRequest:
        return False
    return True


class PatternsAgreeTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()
        self.volume = utils.create_volume(self.admin)
        self.controller = api_fence.FenceController()

    def api_accepts_set(self, host, epoch) -> bool:
        """The set action, through the controller, on a real volume row."""
        request = fakes.HTTPRequest.blank(
            '/v3/%s/volumes/%s/action' % (fakes.FAKE_UUID, self.volume.id),
            use_admin_context=True)
        try:
            self.controller._set_fence(request, self.volume.id, {
                wire.SET_ACTION: {'host': host, 'epoch': epoch}})
        except webob.exc.HTTPBadRequest:
            return False
        return True

    def test_set_action_and_host_library_agree_on_epochs(self):
        for epoch in EPOCHS:
            if epoch == '':
                continue    # "no epoch": the library sends none
            self.assertEqual(
                host_library_accepts(validation.epoch, epoch),
                self.api_accepts_set('compute-1', epoch), repr(epoch))

    def test_set_action_and_host_library_agree_on_hosts(self):
        for host in HOSTS:
            self.assertEqual(
                host_library_accepts(validation.fence_host, host),
                self.api_accepts_set(host, 'att-1'), repr(host))

    def test_a_cinder_attachment_id_is_an_epoch_everywhere(self):
        attachment_id = uuidutils.generate_uuid()
        self.assertTrue(self.api_accepts_set('compute-1', attachment_id))
        self.assertEqual(attachment_id, validation.epoch(attachment_id))

    def test_an_epoch_that_reads_as_an_option_is_refused_everywhere(self):
        # main: the API stored '-att' that the host's journal, ownership
        # record and privsep entry points refuse
        self.assertFalse(self.api_accepts_set('compute-1', '-att'))
        self.assertFalse(host_library_accepts(validation.epoch, '-att'))

    def test_client_refuses_before_sending_what_the_api_refuses(self):
        sent = []

        class Http:
            def post(self, *args, **kwargs):
                sent.append(args)

        client = host_fence.FenceClient(type('Cinder', (), {
            'client': Http()})())
        for host, epoch in (('a b', 'att-1'), ('compute-1', '-att')):
            self.assertRaises(exception.InvalidInput, client.set,
                              'vol-1', host, epoch)
        self.assertEqual([], sent)

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(EDGE_TEXT, EDGE_TEXT)
    def test_expect_record_and_host_library_agree(self, host, epoch):
        self.assertEqual(
            host_library_accepts(validation.fence_host, host) and
            host_library_accepts(validation.epoch, epoch),
            api_accepts_expect(host, epoch))
