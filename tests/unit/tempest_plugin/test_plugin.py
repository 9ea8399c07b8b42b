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

"""Registration of the tempest plugin: entry point, options, test loading.

Options are registered on a private ConfigOpts here; test discovery runs
in a child Python, because importing the tests loads tempest's global
configuration.
"""

import json
import os
import subprocess
import sys
import textwrap

import fixtures
from oslo_config import cfg
import stevedore
import testtools

from os_brick_cas_tempest_plugin import config as plugin_config
from os_brick_cas_tempest_plugin import plugin

OPTION_NAMES = {'enabled', 'offered_modes', 'volume_types',
                'compute_host_access', 'compute_ssh_user',
                'compute_ssh_key_file', 'compute_host_addresses'}

PREFIX = 'os_brick_cas_tempest_plugin.tests.'
EXPECTED_TESTS = {
    'api.test_extra_specs.CacheModeExtraSpecsTest.'
    'test_cacheable_multiattach_type_refused',
    'api.test_extra_specs.CacheModeExtraSpecsTest.'
    'test_unknown_cache_mode_refused',
    'api.test_extra_specs.CacheModeExtraSpecsTest.'
    'test_configured_types_ask_for_their_mode',
    'scenario.test_cached_volumes.TestCachedVolumeDataWriteThrough.'
    'test_data_survives_detach_and_reattach',
    'scenario.test_cached_volumes.TestCachedVolumeDataWriteBack.'
    'test_data_survives_server_reboot',
    'scenario.test_cached_volumes.TestCasDeviceOnComputeHost.'
    'test_cas_device_exists_only_while_attached',
    'scenario.test_cache_mode_rules.TestLiveMigrationWriteThrough.'
    'test_live_migration_keeps_data',
    'scenario.test_cache_mode_rules.TestLiveMigrationWriteBack.'
    'test_live_migration_keeps_data',
    'scenario.test_cache_mode_rules.TestSnapshotRuleWriteBack.'
    'test_snapshot_refused_while_attached_allowed_after_detach',
}

# Run in a child: discover the plugin's tests the way tempest does (from
# load_tests) and run them with the feature disabled.
DISCOVER_AND_RUN = textwrap.dedent('''
    import json
    import sys
    import unittest

    from os_brick_cas_tempest_plugin import plugin

    test_dir, top = plugin.OsBrickCasTempestPlugin().load_tests()
    suite = unittest.TestLoader().discover(test_dir, top_level_dir=top)

    def ids(suite):
        for item in suite:
            if isinstance(item, unittest.TestSuite):
                yield from ids(item)
            else:
                yield item.id()

    listed = sorted(ids(suite))
    result = unittest.TestResult()
    suite.run(result)
    json.dump({'ids': listed, 'run': result.testsRun,
               'skipped': [[str(t), r] for t, r in result.skipped],
               'errors': [[str(t), e] for t, e in result.errors],
               'failures': [[str(t), f] for t, f in result.failures]},
              open(sys.argv[1], 'w'))
''')


class OptionsTestCase(testtools.TestCase):

    def conf(self, text=None):
        conf = cfg.ConfigOpts()
        plugin.OsBrickCasTempestPlugin().register_opts(conf)
        args = []
        if text is not None:
            path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'tempest.conf')
            with open(path, 'w') as conf_file:
                conf_file.write(text)
            args = ['--config-file', path]
        conf(args, project='tempest')
        return conf

    def test_defaults(self):
        group = self.conf().os_brick_cas_tempest
        self.assertFalse(group.enabled)
        self.assertEqual(['wt', 'wb'], group.offered_modes)
        self.assertEqual({'wt': 'cas-wt', 'wb': 'cas-wb'},
                         group.volume_types)
        self.assertFalse(group.compute_host_access)
        self.assertIsNone(group.compute_ssh_user)
        self.assertIsNone(group.compute_ssh_key_file)
        self.assertEqual({}, group.compute_host_addresses)

    def test_values_from_tempest_conf(self):
        group = self.conf(textwrap.dedent('''
            [os_brick_cas_tempest]
            enabled = True
            offered_modes = wt,wo,pt
            volume_types = wt:fast-wt,wo:journal
            compute_host_access = True
            compute_ssh_user = stack
            compute_ssh_key_file = /opt/stack/.ssh/id_rsa
            compute_host_addresses = cmp1:192.0.2.11,cmp2:192.0.2.12
            ''')).os_brick_cas_tempest
        self.assertTrue(group.enabled)
        self.assertEqual(['wt', 'wo', 'pt'], group.offered_modes)
        self.assertEqual({'wt': 'fast-wt', 'wo': 'journal'},
                         group.volume_types)
        self.assertTrue(group.compute_host_access)
        self.assertEqual('stack', group.compute_ssh_user)
        self.assertEqual('/opt/stack/.ssh/id_rsa',
                         group.compute_ssh_key_file)
        self.assertEqual({'cmp1': '192.0.2.11', 'cmp2': '192.0.2.12'},
                         group.compute_host_addresses)

    def test_unknown_mode_is_refused(self):
        conf = self.conf('[os_brick_cas_tempest]\n'
                         'offered_modes = wt,writeback\n')
        self.assertRaises(cfg.ConfigFileValueError,
                          lambda: conf.os_brick_cas_tempest.offered_modes)

    def test_group(self):
        self.assertEqual('os_brick_cas_tempest',
                         plugin_config.os_brick_cas_group.name)
        self.assertEqual('os-brick-cas cached volume options',
                         plugin_config.os_brick_cas_group.title)

    def test_option_lists_for_the_sample_config(self):
        [(name, options)] = plugin.OsBrickCasTempestPlugin().get_opt_lists()
        self.assertEqual('os_brick_cas_tempest', name)
        self.assertEqual(OPTION_NAMES, {option.name for option in options})
        for option in options:
            self.assertGreater(len(option.help or ''), 30, option.name)


class RegistrationTestCase(testtools.TestCase):

    def test_entry_point(self):
        manager = stevedore.ExtensionManager('tempest.test_plugins')
        plugins = {ext.name: ext.plugin for ext in manager}
        self.assertIs(plugin.OsBrickCasTempestPlugin,
                      plugins.get('os_brick_cas'))

    def test_load_tests_points_at_the_plugin_package(self):
        test_dir, top = plugin.OsBrickCasTempestPlugin().load_tests()
        self.assertEqual(os.path.join(top, 'os_brick_cas_tempest_plugin',
                                      'tests'), test_dir)
        for package in ('', 'api', 'scenario'):
            self.assertTrue(os.path.isfile(
                os.path.join(test_dir, package, '__init__.py')), package)
        # never a top-level "tests" package that would shadow others
        self.assertFalse(os.path.isfile(os.path.join(top, '__init__.py')))

    def test_tests_are_discovered_and_skip_when_disabled(self):
        workdir = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(workdir, 'tempest.conf'), 'w') as conf:
            conf.write('[oslo_concurrency]\nlock_path = %s\n\n'
                       '[os_brick_cas_tempest]\nenabled = False\n' % workdir)
        env = dict(os.environ, TEMPEST_CONFIG_DIR=workdir,
                   TEMPEST_CONFIG='tempest.conf')
        output = os.path.join(workdir, 'result.json')
        child = subprocess.run(
            [sys.executable, '-c', DISCOVER_AND_RUN, output], cwd=workdir,
            env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(0, child.returncode, child.stderr)
        with open(output) as result_file:
            result = json.load(result_file)
        self.assertEqual([], result['errors'])
        self.assertEqual([], result['failures'])
        # tempest appends "[id-<uuid>,<attrs>]" to test ids
        listed = {name.split('[')[0][len(PREFIX):] for name in result['ids']
                  if name.startswith(PREFIX)}
        self.assertEqual(len(result['ids']), len(listed),
                         'tests outside the plugin package: %s'
                         % result['ids'])
        self.assertTrue(EXPECTED_TESTS <= listed,
                        EXPECTED_TESTS - listed)
        self.assertGreaterEqual(len(listed), 20)
        # A class skipped in setUpClass is reported once, as
        # "setUpClass (<module>.<class>)"; every class must be among them.
        skipped = ' '.join(test for test, _ in result['skipped'])
        for name in result['ids']:
            test_class = name.split('[')[0].rsplit('.', 1)[0]
            self.assertIn(test_class, skipped)
        for test, reason in result['skipped']:
            self.assertIn('[os_brick_cas_tempest] enabled = False', reason,
                          test)
        self.assertEqual(len(result['skipped']), result['run'] + len(
            [test for test, _ in result['skipped']
             if test.startswith('setUpClass (')]))
