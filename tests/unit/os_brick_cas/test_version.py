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

"""``os-brick-cas --version`` is the installed package's (pbr) version."""

import importlib.metadata
import io

import fixtures
import testtools

from os_brick_cas.cmd import main as cli


class VersionTestCase(testtools.TestCase):

    def test_version_option_prints_the_package_version(self):
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        exc = self.assertRaises(SystemExit, cli.main, ['--version'])
        self.assertEqual(0, exc.code)
        self.assertEqual(
            'os-brick-cas %s' % importlib.metadata.version('os-brick-cas'),
            out.getvalue().strip())
