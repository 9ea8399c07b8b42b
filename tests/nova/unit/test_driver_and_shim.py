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

import os
import subprocess
import sys
import textwrap
from unittest import mock

import fixtures
from nova.virt.libvirt import driver as libvirt_driver
from oslo_utils import importutils
import testtools

from nova_ext import cmd as nova_cmd
from nova_ext import driver as nova_driver
from nova_ext import hook


class CompatibilityTestCase(testtools.TestCase):

    def test_installed_nova_is_compatible(self):
        nova_driver.check_nova_compatibility()

    def test_missing_method_fails_fast_with_advice(self):
        class OldNova(object):
            def _get_volume_driver(self, connection_info):
                pass

            def update_provider_tree(self, provider_tree, nodename,
                                     allocations=None):
                pass

        exc = self.assertRaises(nova_driver.IncompatibleNova,
                                nova_driver.check_nova_compatibility, OldNova)
        self.assertIn('check_can_live_migrate_source is missing', str(exc))
        self.assertIn('compute_driver back to libvirt.LibvirtDriver',
                      str(exc))

    def test_changed_signature_fails_fast(self):
        class ChangedNova(libvirt_driver.LibvirtDriver):
            def _get_volume_driver(self, connection_info, instance):
                pass

        exc = self.assertRaises(nova_driver.IncompatibleNova,
                                nova_driver.check_nova_compatibility,
                                ChangedNova)
        self.assertIn('is now _get_volume_driver(self, connection_info, '
                      'instance)', str(exc))


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

#: run in a fresh interpreter: drop any hook this venv already has, show the
#: import fails, then let site process the freshly built .pth and load the
#: driver through nova's own loader
LOAD_THROUGH_BUILT_PTH = textwrap.dedent("""
    import os, site, sys, warnings
    warnings.simplefilter('ignore')
    from nova_ext import hook
    hook.uninstall()
    try:
        import nova.virt.os_brick_cas_libvirt
        sys.exit('imported without the hook')
    except ImportError:
        pass
    site.addsitedir(sys.argv[1])
    import nova.conf
    from nova.tests.fixtures import libvirt as fakelibvirt
    from nova.virt import driver
    import nova.virt
    nova.conf.CONF([], project='nova')
    fakelibvirt.LibvirtFixture().setUp()
    loaded = driver.load_compute_driver(
        None, 'os_brick_cas_libvirt.CachedRBDLibvirtDriver')
    virt = os.path.dirname(nova.virt.__file__)
    print(type(loaded).__module__, type(loaded).__name__,
          [f for f in os.listdir(virt) if 'os_brick' in f])
""")


class HookTestCase(testtools.TestCase):
    """nova.virt.os_brick_cas_libvirt comes from site-packages, not nova."""

    def setUp(self):
        super().setUp()
        was_installed = hook.installed()
        self.addCleanup(hook.install if was_installed else hook.uninstall)
        hook.uninstall()

    def test_finder_provides_the_driver_module(self):
        self.assertRaises(ImportError, importutils.import_class,
                          'nova.virt.os_brick_cas_libvirt.'
                          'CachedRBDLibvirtDriver')
        hook.install()
        hook.install()
        self.assertEqual(1, sum(isinstance(f, hook.NovaDriverFinder)
                                for f in sys.meta_path))
        self.assertIs(nova_driver.CachedRBDLibvirtDriver,
                      importutils.import_class(
                          'nova.virt.os_brick_cas_libvirt.'
                          'CachedRBDLibvirtDriver'))
        self.assertIsNone(hook.NovaDriverFinder().find_spec(
            'nova.virt.other', None))

    def test_built_package_ships_the_pth_and_nova_loads_the_driver(self):
        build = self.useFixture(fixtures.TempDir()).path
        subprocess.run([sys.executable, 'setup.py', '-q', 'build_py',
                        '--build-lib', build], cwd=ROOT, check=True,
                       capture_output=True)
        with open(os.path.join(build, hook.PTH_NAME)) as pth:
            self.assertEqual('import nova_ext.hook; nova_ext.hook.install()',
                             pth.read().strip())
        env = dict(os.environ, PYTHONPATH=ROOT)
        result = subprocess.run(
            [sys.executable, '-c', LOAD_THROUGH_BUILT_PTH, build],
            env=env, capture_output=True, text=True)
        self.assertEqual(0, result.returncode, result.stderr[-2000:])
        self.assertEqual('nova_ext.driver CachedRBDLibvirtDriver []',
                         result.stdout.strip().splitlines()[-1])


class NovaShimCommandTestCase(testtools.TestCase):
    """``os-brick-cas nova-shim``: check explains, install is obsolete."""

    def run_cmd(self, action, virt_dir=None):
        out = self.useFixture(fixtures.StringStream('out')).stream
        err = self.useFixture(fixtures.StringStream('err')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        args = mock.Mock(action=action, virt_dir=virt_dir)
        code = nova_cmd._run(args)
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read()

    def fake_nova(self) -> str:
        virt = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova', 'virt')
        os.makedirs(virt)
        return virt

    def test_check_reports_where_the_driver_comes_from(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.cmd.hook_pth', lambda: '/venv/site/' + hook.PTH_NAME))
        hook.install()
        code, out, err = self.run_cmd('check', self.fake_nova())
        self.assertEqual(0, code, err)
        self.assertIn('loads nova_ext.driver.CachedRBDLibvirtDriver '
                      '(provided by /venv/site/os_brick_cas_nova.pth; '
                      "nothing in nova's tree)", out)

    def test_check_without_the_hook_says_what_to_do(self):
        self.useFixture(fixtures.MonkeyPatch('nova_ext.cmd.hook_pth',
                                             lambda: None))
        self.addCleanup(hook.install if hook.installed() else hook.uninstall)
        hook.uninstall()
        code, out, err = self.run_cmd('check')
        self.assertEqual(1, code)
        self.assertIn('os_brick_cas_nova.pth is not installed', err)
        self.assertIn('Install os-brick-cas into the environment '
                      'nova-compute runs from', err)

    def test_check_points_at_a_left_over_shim_file(self):
        virt = self.fake_nova()
        with open(nova_cmd.shim_path(virt), 'w') as old:
            old.write(nova_cmd.SHIM_TEXT)
        hook.install()
        code, out, err = self.run_cmd('check', virt)
        self.assertEqual(0, code)
        self.assertIn('os-brick-cas nova-shim remove', err)

    def test_install_is_a_no_op_with_advice(self):
        virt = self.fake_nova()
        code, out, err = self.run_cmd('install', virt)
        self.assertEqual(0, code)
        self.assertIn('nothing to install', out)
        self.assertEqual([], os.listdir(virt))

    def test_remove_deletes_an_old_shim_only(self):
        virt = self.fake_nova()
        with open(nova_cmd.shim_path(virt), 'w') as old:
            old.write(nova_cmd.SHIM_TEXT)
        self.assertEqual(0, self.run_cmd('remove', virt)[0])
        self.assertEqual([], os.listdir(virt))
        with open(nova_cmd.shim_path(virt), 'w') as other:
            other.write('# someone else\n')
        self.assertRaises(SystemExit, nova_cmd.remove, virt)
        self.assertTrue(os.path.exists(nova_cmd.shim_path(virt)))
