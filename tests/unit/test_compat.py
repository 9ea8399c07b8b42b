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


"""os_brick_cas.compat: which supported OpenStack release is installed."""

import importlib.metadata

import testtools

from os_brick_cas import compat


class ReleaseOfTestCase(testtools.TestCase):

    def test_each_series_maps_to_its_release(self):
        for release, series in compat.RELEASES.items():
            for dist, numbers in series.items():
                version = '.'.join(map(str, numbers)) + '.0'
                self.assertEqual(release, compat.release_of(dist, version),
                                 '%s %s' % (dist, version))

    def test_patch_releases_and_later_series(self):
        self.assertEqual('2025.1', compat.release_of('os-brick', '6.11.1'))
        self.assertEqual('2025.1', compat.release_of('os-brick', '6.14.0'))
        self.assertEqual('2026.1', compat.release_of('os-brick', '7.0.0'))
        self.assertEqual('2025.1', compat.release_of('nova', '32.2.1'))
        self.assertEqual('2026.2', compat.release_of('nova', '35.0.0'))

    def test_older_than_every_supported_release(self):
        self.assertIsNone(compat.release_of('os-brick', '6.10.0'))
        self.assertIsNone(compat.release_of('cinder', '25.3.1'))
        self.assertFalse(compat.at_least(None, compat.OLDEST))

    def test_order(self):
        self.assertTrue(compat.at_least('2026.2', '2026.1'))
        self.assertTrue(compat.at_least('2026.1', '2026.1'))
        self.assertFalse(compat.at_least('2025.1', '2026.1'))

    def test_installed_os_brick_is_supported(self):
        self.assertIsNotNone(compat.OS_BRICK_RELEASE,
                             importlib.metadata.version('os-brick'))


class ReleaseConstraintsTestCase(testtools.TestCase):
    """Each release's constraints pin its own services and our requirements."""

    def test_each_release_pins_its_series_and_every_requirement(self):
        from tests.unit import test_packaging
        tool = test_packaging._constraints_tool()
        self.assertEqual(list(compat.RELEASES), list(tool.RELEASES))
        wanted = {tool.canonicalize_name(req.name)
                  for req in tool.requirements()}
        for release, series in compat.RELEASES.items():
            pins = {tool.canonicalize_name(name): version for name, version
                    in tool.pinned(tool.output_for(release)).items()}
            self.assertEqual(set(), wanted - set(pins), release)
            for dist, numbers in series.items():
                self.assertEqual(release, compat.release_of(dist, pins[dist]),
                                 '%s pins %s %s' % (release, dist,
                                                    pins[dist]))
                self.assertEqual(tool.RELEASES[release]['pins'][dist],
                                 pins[dist], release)
