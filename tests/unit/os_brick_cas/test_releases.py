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

"""Kernel support per Open CAS release line (22.6 ... 26.09)."""

import testtools

from os_brick_cas.opencas import releases


class CheckKernelTestCase(testtools.TestCase):

    def test_newest_kernel_of_each_line_is_supported(self):
        for cas, kernel in [('22.06.0.0694.master', '5.15.0-91-generic'),
                            ('24.09.0.0900.release', '6.9.12'),
                            ('25.03.0.0001.release', '6.14.1'),
                            ('25.12.1.0001.release', '6.16.0'),
                            ('26.03.2.1032.release', '6.18.44-fc'),
                            ('26.09.0.1100.release', '7.2.0')]:
            supported, message = releases.check_kernel(kernel, cas)
            self.assertTrue(supported, message)

    def test_one_minor_newer_is_not_supported(self):
        for cas, kernel, line in [('22.6.3', '5.16.0', '24.9'),
                                  ('24.09.0', '6.10.1', '25.03'),
                                  ('26.03.2.1032.release', '6.19.0', '26.09')]:
            supported, message = releases.check_kernel(kernel, cas)
            self.assertFalse(supported)
            self.assertIn('upgrade Open CAS to %s' % line, message)

    def test_beyond_the_newest_line(self):
        supported, message = releases.check_kernel('7.3.0', '26.09.0')
        self.assertFalse(supported)
        self.assertIn('no Open CAS line supports it yet', message)

    def test_unknown_line_and_garbage(self):
        self.assertFalse(releases.check_kernel('5.10', '21.3.0')[0])
        self.assertIn('unrecognised version',
                      releases.check_kernel('5.10', '?')[1])


class CheckCliTestCase(testtools.TestCase):

    def test_per_core_flush_syntax_decides(self):
        for version in ('24.09.0.0900.release', '26.03.2.1032.release',
                        '26.09.0.1100.release'):
            self.assertTrue(releases.check_cli(version)[0], version)
        for version in ('22.06.3.0724.release', '22.6.3', '21.3.0'):
            supported, message = releases.check_cli(version)
            self.assertFalse(supported, version)
            self.assertIn('its per-core flush is -E', message)
            self.assertIn('Upgrade Open CAS to 24.9 or newer', message)
        self.assertFalse(releases.check_cli('Not Loaded')[0])
