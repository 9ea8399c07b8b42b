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

"""doctor's host hook: casadm and the module must be of one release."""

from os_brick_cas import casadm
from os_brick_cas.opencas import releases
from tests.unit.os_brick_cas import base


def version_csv(module: str, cli: str) -> tuple[int, str, str]:
    return (0, 'Name,Version\nCAS Cache Kernel Module,%s\nCAS CLI Utility,'
               '%s\n' % (module, cli), '')


class ReleaseLineTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())

    def test_different_lines_fail(self):
        self.fake.reply('--version', version_csv('26.03.2.0000.release',
                                                 '25.12.2.0000.release'))
        [(level, message)] = releases.same_release_line(
            casadm.Casadm().version())
        self.assertEqual('FAIL', level)
        self.assertIn('casadm 25.12.2.0000.release and the cas_cache module '
                      '26.03.2.0000.release are of different Open CAS '
                      'releases', message)

    def test_same_line_or_module_not_loaded_is_quiet(self):
        self.fake.reply('--version', version_csv('26.03.2.0000.release',
                                                 '26.03.1.0000.release'))
        self.assertEqual([], releases.same_release_line(
            casadm.Casadm().version()))
        self.fake.reply('--version', version_csv('Not Loaded',
                                                 '26.03.2.0000.release'))
        self.assertEqual([], releases.same_release_line(
            casadm.Casadm().version()))
