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

"""The committed sample configuration is what the generator produces."""

import os

import fixtures
from oslo_config import generator
import testtools

from nova_ext import opts as nova_opts
from os_brick_cas import compat as cas_compat
from os_brick_cas.metrics import opts as metrics_opts
from os_brick_cas import opts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SAMPLES = {'os-brick-cas.conf': 'os-brick-cas.conf.sample',
           'nova-os-brick-cas.conf': 'nova-os-brick-cas.conf.sample'}


class ConfigSampleTestCase(testtools.TestCase):

    def test_samples_are_in_sync(self):
        if cas_compat.OS_BRICK_RELEASE != cas_compat.NEWEST:
            # the privsep options come from the installed oslo.privsep,
            # which is older there (no log_daemon_traceback in 2025.1)
            self.skipTest('samples are generated on OpenStack %s'
                          % cas_compat.NEWEST)
        tmp = self.useFixture(fixtures.TempDir()).path
        for config, sample in SAMPLES.items():
            output = os.path.join(tmp, sample)
            generator.main(['--config-file', os.path.join(
                ROOT, 'etc', 'oslo-config-generator', config),
                '--output-file', output])
            with open(output) as generated, open(
                    os.path.join(ROOT, 'etc', sample)) as committed:
                self.assertEqual(
                    generated.read(), committed.read(),
                    'etc/%s is stale: run tox -e genconfig' % sample)

    def test_every_option_has_help(self):
        for group, options in (
                opts.list_opts() + metrics_opts.list_opts() +
                nova_opts.list_opts()):
            for option in options:
                self.assertTrue(option.help and len(option.help) > 20,
                                '[%s] %s has no useful help' % (
                                    group, option.name))
