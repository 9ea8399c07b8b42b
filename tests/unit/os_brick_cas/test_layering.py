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

"""Library modules never import the CLI (os_brick_cas.cmd) or nova_ext.

Read from the source (ast), so an import inside a function counts too.
"""

import ast
import os

import testtools

import os_brick_cas

ROOT = os.path.dirname(os_brick_cas.__file__)
#: the CLI itself, and the stand-ins tests and the demo run
EDGES = ('cmd', 'simulator')
FORBIDDEN = ('os_brick_cas.cmd', 'nova_ext')


def library_modules():
    for directory, dirs, files in os.walk(ROOT):
        relative = os.path.relpath(directory, ROOT)
        if relative.split(os.sep)[0] in EDGES:
            continue
        for name in files:
            if name.endswith('.py'):
                yield os.path.join(directory, name)


def imported(path: str) -> set[str]:
    with open(path) as source:
        tree = ast.parse(source.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update('%s.%s' % (node.module, alias.name)
                         for alias in node.names)
    return names


class LayeringTestCase(testtools.TestCase):

    def test_library_modules_never_import_cmd_or_nova_ext(self):
        offenders = {}
        for path in library_modules():
            bad = sorted(name for name in imported(path)
                         if name.startswith(FORBIDDEN))
            if bad:
                offenders[os.path.relpath(path, ROOT)] = bad
        self.assertEqual({}, offenders)


CINDER_EXT = os.path.join(os.path.dirname(ROOT), 'cinder_ext')
#: what only the operator CLI needs: never loaded by cinder's services
CLI_ONLY = ('os_brick_cas.cmd', 'keystoneauth1', 'cinderclient', 'openstack')
#: modules both cinder-api and compute hosts load: no service imports
SHARED_LEAVES = ('fence_wire.py', 'labels.py', 'stand_in.py')
SERVICES = ('cinder', 'nova', 'cinderclient', 'os_brick_cas', 'oslo')


def package_modules(root: str):
    for directory, dirs, files in os.walk(root):
        for name in files:
            if name.endswith('.py'):
                yield os.path.join(directory, name)


class CinderExtLayeringTestCase(testtools.TestCase):
    """cinder_ext holds only what cinder's services load (issue 38)."""

    def test_cinder_ext_never_imports_the_cli_or_its_clients(self):
        # main: cinder_ext/admin.py, the operator verbs, imported the CLI
        offenders = {}
        for path in package_modules(CINDER_EXT):
            bad = sorted(name for name in imported(path)
                         if name.split('.')[0] in CLI_ONLY or
                         name.startswith(CLI_ONLY))
            if bad:
                offenders[os.path.relpath(path, CINDER_EXT)] = bad
        self.assertEqual({}, offenders)

    def test_extra_specs_the_cli_validates_with_imports_no_cinder(self):
        path = os.path.join(CINDER_EXT, 'extra_specs.py')
        self.assertEqual([], sorted(
            name for name in imported(path)
            if name.split('.')[0] in ('cinder', 'nova')))

    def test_shared_leaves_import_nothing_of_a_service_or_the_suite(self):
        for name in SHARED_LEAVES:
            path = os.path.join(ROOT, name)
            self.assertEqual([], sorted(
                module for module in imported(path)
                if module.split('.')[0] in SERVICES), name)
