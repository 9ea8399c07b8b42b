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

"""The tempest plugin's registration and helper logic, without a cloud."""

import os
import subprocess
import types

import fixtures
from oslo_config import cfg
import testtools

from os_brick_cas_tempest_plugin import config as plugin_config
from os_brick_cas_tempest_plugin import helpers
from os_brick_cas_tempest_plugin import plugin

VOLUME = '0d6c3a4e-3c5b-4d5e-9f1a-2b3c4d5e6f70'
CASADM_CSV = (
    'type,id,disk,status,write policy,device\n'
    'cache,1,/dev/disk/by-id/nvme-a-part1,Running,wt,-\n'
    'core,1,/dev/disk/by-id/rbd-volumes-volume-%s,Active,-,/dev/cas1-1\n'
    'cache,2,/dev/disk/by-id/nvme-a-part2,Running,wb,-\n'
    'core,1,/dev/disk/by-id/rbd-volumes-volume-other,Active,-,/dev/cas2-1\n'
    % VOLUME)


class PluginTestCase(testtools.TestCase):

    def test_registers_its_own_group(self):
        conf = cfg.ConfigOpts()
        plugin.OsBrickCasTempestPlugin().register_opts(conf)
        conf([])
        group = conf[plugin_config.GROUP]
        self.assertFalse(group.enabled)
        self.assertEqual(['wt', 'wb'], group.offered_modes)
        self.assertEqual({'wt': 'cas-wt', 'wb': 'cas-wb'},
                         group.volume_types)

    def test_option_list_for_sample_generation(self):
        [(name, options)] = plugin.OsBrickCasTempestPlugin().get_opt_lists()
        self.assertEqual(plugin_config.GROUP, name)
        self.assertEqual({'enabled', 'offered_modes', 'volume_types',
                          'compute_host_access', 'compute_ssh_user',
                          'compute_ssh_key_file'},
                         {option.name for option in options})

    def test_tests_are_loaded_from_the_plugin_package(self):
        test_dir, top = plugin.OsBrickCasTempestPlugin().load_tests()
        self.assertTrue(os.path.isdir(test_dir))
        self.assertEqual(os.path.join(top, 'os_brick_cas_tempest_plugin',
                                      'tests'), test_dir)


class SkipReasonTestCase(testtools.TestCase):

    def group(self, **overrides):
        values = dict(enabled=True, offered_modes=['wt', 'wb'],
                      volume_types={'wt': 'cas-wt', 'wb': 'cas-wb'})
        values.update(overrides)
        return types.SimpleNamespace(**values)

    def test_disabled(self):
        self.assertIn('disabled', helpers.skip_reason(
            self.group(enabled=False), 'wt'))

    def test_mode_not_offered(self):
        self.assertIn('wo is not offered', helpers.skip_reason(
            self.group(), 'wo'))

    def test_mode_without_type(self):
        self.assertIn('no volume type', helpers.skip_reason(
            self.group(volume_types={'wt': 'cas-wt'}), 'wb'))

    def test_runs(self):
        self.assertIsNone(helpers.skip_reason(self.group(), 'wb'))
        self.assertIsNone(helpers.skip_reason(self.group()))


class GuestCommandsTestCase(testtools.TestCase):
    """The guest commands run here in dash, on a file for a disk."""

    def run_guest(self, command: str) -> str:
        # the guest runs them through sudo; here "sudo" just runs them
        return subprocess.run(['dash', '-c', 'sudo() { "$@"; }; ' + command],
                              capture_output=True, text=True,
                              check=True).stdout

    def test_written_pattern_has_the_expected_md5(self):
        disk = os.path.join(self.useFixture(fixtures.TempDir()).path, 'vdb')
        with open(disk, 'wb') as image:
            image.truncate(1024 * 1024)
        label = VOLUME
        self.run_guest(helpers.write_pattern_command(disk, label))
        with open(disk, 'rb') as image:
            self.assertEqual(helpers.pattern(label),
                             image.read(helpers.PATTERN_BYTES))
        self.assertEqual(helpers.md5(helpers.pattern(label)),
                         self.run_guest(helpers.read_md5_command(
                             disk)).strip())

    def test_patterns_differ_per_volume(self):
        self.assertNotEqual(helpers.pattern('a'), helpers.pattern('b'))
        self.assertEqual(helpers.PATTERN_BYTES, len(helpers.pattern('a')))


class CasCoreTestCase(testtools.TestCase):

    def test_core_of_volume(self):
        core = helpers.cas_core_of_volume(CASADM_CSV, VOLUME)
        self.assertEqual((1, 1, '/dev/cas1-1'),
                         (core.cache_id, core.core_id, core.exported))

    def test_volume_not_cached(self):
        self.assertIsNone(helpers.cas_core_of_volume(
            CASADM_CSV, '11111111-2222-3333-4444-555555555555'))
