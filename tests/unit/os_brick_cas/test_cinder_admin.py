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

"""The cinderclient-based operator commands, against Cinder's HTTP API.

requests-mock answers at the HTTP layer; cinderclient, keystoneauth1 and
the commands above them are real.
"""

import io
import json
import os
from unittest import mock

import fixtures
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from requests_mock.contrib import fixture as rm_fixture
import testtools

from os_brick_cas.cmd import cinder_admin
from os_brick_cas.cmd import cinder_session
from os_brick_cas.cmd import main as cli

ENDPOINT = 'http://cinder.test/v3/project'
VOLUME = '6d54cb90-a5d1-40d8-9cb2-c6adf43a02af'


class AdminCommandsTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.http = self.useFixture(rm_fixture.Fixture())
        self.useFixture(fixtures.MockPatchObject(
            cinder_session, 'session_factory', lambda: ks_session.Session(
                auth=token_endpoint.Token(ENDPOINT, 'admin-token'))))
        self.out = self.useFixture(fixtures.MockPatch(
            'sys.stdout', new_callable=io.StringIO)).mock
        self.err = self.useFixture(fixtures.MockPatch(
            'sys.stderr', new_callable=io.StringIO)).mock

    def run_cli(self, *argv: str) -> int:
        return cli.main(list(argv))

    def test_type_create_posts_type_and_specs(self):
        self.http.post(ENDPOINT + '/types', json={'volume_type': {
            'id': 'type-1', 'name': 'cas-wb', 'extra_specs': {}}})
        keys = self.http.post(ENDPOINT + '/types/type-1/extra_specs',
                              json={'extra_specs': {}})
        self.assertEqual(0, self.run_cli('type-create', 'cas-wb', '--mode',
                                         'wb', '--backend', 'ceph'))
        self.assertEqual({'volume_type': {
            'name': 'cas-wb', 'description': 'Open CAS wb cache on the '
                                             'compute host',
            'os-volume-type-access:is_public': True}},
            json.loads(self.http.request_history[0].text))
        self.assertEqual({'extra_specs': {
            'cacheable': '<is> True', 'cas:cache_mode': 'wb',
            'volume_backend_name': 'ceph'}}, keys.last_request.json())
        self.assertEqual('admin-token',
                         keys.last_request.headers['X-Auth-Token'])

    def test_type_show_flags_invalid_specs(self):
        self.http.get(ENDPOINT + '/types', json={'volume_types': [
            {'id': 'type-2', 'name': 'broken', 'extra_specs': {}}]})
        self.http.get(ENDPOINT + '/types/type-2/extra_specs', json={
            'extra_specs': {'cas:cache_mode': 'wb'}})
        self.assertEqual(1, self.run_cli('type-show', 'broken'))
        self.assertIn("INVALID: Extra spec 'cas:cache_mode' needs "
                      "'cacheable'", self.out.getvalue())

    def test_fence_show(self):
        self.http.get(ENDPOINT + '/volumes/' + VOLUME, json={'volume': {
            'id': VOLUME, 'os-brick-cas:fence': 'compute-3',
            'os-brick-cas:fence-epoch': 'att-9',
            'os-brick-cas:fence-lost': 'compute-1/att-1'}})
        self.assertEqual(0, self.run_cli('fence-show', VOLUME))
        self.assertIn('fenced by host compute-3 (attachment att-9)',
                      self.out.getvalue())
        self.assertIn('declared lost: host compute-1 attachment att-1',
                      self.out.getvalue())

    def test_fence_clear_needs_confirmation(self):
        self.http.get(ENDPOINT + '/volumes/' + VOLUME, json={'volume': {
            'id': VOLUME, 'os-brick-cas:fence': 'compute-3'}})
        action = self.http.post(ENDPOINT + '/volumes/%s/action' % VOLUME,
                                status_code=202)
        self.assertEqual(1, self.run_cli('fence-clear', VOLUME))
        self.assertIn('--host-lost', self.err.getvalue())
        self.assertFalse(action.called)
        self.assertEqual(0, self.run_cli('fence-clear', VOLUME,
                                         '--host-lost'))
        # cinder records the cleared owner as lost (what discard checks),
        # only if the marker still names the host shown
        expected = {'os-brick-cas-clear-fence': {
            'lost': True, 'expect': {'host': 'compute-3', 'epoch': None,
                                     'drained': False}}}
        self.assertEqual(expected, action.last_request.json())

    def test_fence_clear_does_not_declare_a_new_owner_lost(self):
        """Another host took the marker over after it was read."""
        self.http.get(ENDPOINT + '/volumes/' + VOLUME, json={'volume': {
            'id': VOLUME, 'os-brick-cas:fence': 'compute-3',
            'os-brick-cas:fence-epoch': 'att-3'}})
        self.http.post(ENDPOINT + '/volumes/%s/action' % VOLUME,
                       status_code=409, json={'conflict': {
                           'message': 'changed', 'current': {
                               'host': 'compute-4', 'epoch': 'att-4',
                               'drained': False}}})
        self.assertEqual(1, self.run_cli('fence-clear', VOLUME,
                                         '--host-lost'))
        self.assertIn('Cinder holds the marker naming host compute-4',
                      self.err.getvalue())
        self.assertNotIn('cleared', self.out.getvalue())

    def test_refused_mode_is_not_sent(self):
        refused = cinder_admin.extra_specs.ExtraSpecError('nope')
        with mock.patch.object(cinder_admin, 'type_specs',
                               side_effect=refused):
            self.assertEqual(1, self.run_cli('type-create', 'x', '--mode',
                                             'wt'))
        self.assertEqual([], self.http.request_history)


class CredentialsTestCase(testtools.TestCase):
    """API verbs use the standard client configuration (openstacksdk)."""

    def setUp(self):
        super().setUp()
        for name in [n for n in os.environ if n.startswith('OS_')]:
            self.useFixture(fixtures.EnvironmentVariable(name))
        tmp = self.useFixture(fixtures.TempDir()).path
        self.clouds = os.path.join(tmp, 'clouds.yaml')
        with open(self.clouds, 'w') as clouds:
            clouds.write('clouds:\n  ops:\n    auth:\n'
                         '      auth_url: http://keystone.test/v3\n'
                         '      username: admin\n      password: secret\n'
                         '      project_name: admin\n'
                         '      user_domain_name: Default\n'
                         '      project_domain_name: Default\n')
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', self.clouds))
        self.useFixture(fixtures.EnvironmentVariable('HOME', tmp))

    def test_os_cloud_names_a_clouds_yaml_entry(self):
        self.useFixture(fixtures.EnvironmentVariable('OS_CLOUD', 'ops'))
        session = cinder_session._env_session()
        self.assertEqual('http://keystone.test/v3', session.auth.auth_url)

    def test_missing_credentials_say_what_to_set_without_traceback(self):
        os.unlink(self.clouds)
        exc = self.assertRaises(SystemExit, cinder_session._env_session)
        self.assertIn('Set OS_CLOUD to an entry of clouds.yaml', str(exc))
        self.useFixture(fixtures.EnvironmentVariable('OS_CLOUD', 'nope'))
        exc = self.assertRaises(SystemExit, cinder_session._env_session)
        self.assertIn('nope', str(exc))
