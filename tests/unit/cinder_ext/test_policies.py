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

"""The fence API's policy in code and its committed sample."""

import configparser
import os

import fixtures
from oslo_policy import generator
import testtools

from cinder_ext import policies

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SAMPLE = os.path.join(ROOT, 'etc', 'cinder', 'os-brick-cas-policy.yaml.sample')


class PolicySampleTestCase(testtools.TestCase):

    def test_sample_is_in_sync(self):
        # what oslopolicy-sample-generator --namespace os-brick-cas writes
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_policy.generator.get_policies_dict',
            lambda namespaces: {'os-brick-cas': policies.list_rules()}))
        output = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        generator._generate_sample(['os-brick-cas'], output)
        with open(output) as generated, open(SAMPLE) as committed:
            self.assertEqual(generated.read(), committed.read(),
                             'etc/cinder/os-brick-cas-policy.yaml.sample is '
                             'stale: run tox -e genpolicy')

    def test_generator_finds_the_rules(self):
        setup = configparser.ConfigParser()
        setup.read(os.path.join(ROOT, 'setup.cfg'))
        self.assertIn('os-brick-cas = cinder_ext.policies:list_rules',
                      setup['entry_points']['oslo.policy.policies'])
        generator_conf = configparser.ConfigParser()
        generator_conf.read(os.path.join(
            ROOT, 'etc', 'oslo-policy-generator', 'os-brick-cas-policy.conf'))
        self.assertEqual('os-brick-cas',
                         generator_conf['DEFAULT']['namespace'])

    def test_defaults_admin_or_service(self):
        self.assertEqual(
            {policies.SET: 'rule:admin_api or role:service',
             policies.CLEAR: 'rule:admin_api or role:service',
             policies.SHOW: 'rule:admin_api or role:service'},
            {rule.name: rule.check_str for rule in policies.list_rules()})
