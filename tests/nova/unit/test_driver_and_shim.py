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

import importlib.util
import os

import fixtures
from nova.virt.libvirt import driver as libvirt_driver
import testtools

from nova_ext import cmd as nova_cmd
from nova_ext import driver as nova_driver


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


class ShimTestCase(testtools.TestCase):
    """The shim works in a regular and in an editable (source) nova."""

    def fake_nova(self, root: str) -> str:
        virt = os.path.join(root, 'nova', 'virt')
        os.makedirs(virt)
        for package in (os.path.join(root, 'nova'), virt):
            open(os.path.join(package, '__init__.py'), 'w').close()
        return virt

    def test_install_check_remove_in_editable_layout(self):
        root = self.useFixture(fixtures.TempDir()).path
        virt = self.fake_nova(os.path.join(root, 'src-checkout'))
        path = nova_cmd.install(virt)
        self.assertEqual(os.path.join(virt, 'os_brick_cas_libvirt.py'), path)
        with open(path) as shim:
            self.assertIn('from nova_ext.driver import '
                          'CachedRBDLibvirtDriver', shim.read())
        spec = importlib.util.spec_from_file_location('shim', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.assertIs(nova_driver.CachedRBDLibvirtDriver,
                      module.CachedRBDLibvirtDriver)
        self.assertTrue(nova_cmd.remove(virt))
        self.assertFalse(os.path.exists(path))
        self.assertFalse(nova_cmd.remove(virt))

    def test_remove_refuses_foreign_file(self):
        virt = self.fake_nova(self.useFixture(fixtures.TempDir()).path)
        with open(nova_cmd.shim_path(virt), 'w') as other:
            other.write('# someone else\n')
        self.assertRaises(SystemExit, nova_cmd.remove, virt)
        self.assertTrue(os.path.exists(nova_cmd.shim_path(virt)))

    def test_default_location_is_the_importable_nova(self):
        import nova.virt
        self.assertEqual(os.path.dirname(nova.virt.__file__),
                         os.path.dirname(nova_cmd.shim_path()))
