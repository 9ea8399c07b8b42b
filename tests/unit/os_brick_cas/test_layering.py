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

"""The product's import graph: one-way arrows between its packages.

Read from the source (ast, nothing imported), so an import inside a
function counts too. Units are os_brick_cas's subpackages (opencas, host,
lifecycle, privileged, metrics, cmd) and its root modules, plus nova_ext
and cinder_ext: no cycle between units or between modules; library code
never imports the CLI (os_brick_cas.cmd) nor a service plugin (nova_ext,
cinder_ext); nothing of the product imports the stand-in (cas_standin);
the Open CAS facts (os_brick_cas.opencas) import only leaf utilities.
"""

import ast
import os
from typing import Iterable, Mapping

import testtools

import os_brick_cas

ROOT = os.path.dirname(os_brick_cas.__file__)
TOP = os.path.dirname(ROOT)
FORBIDDEN = ('os_brick_cas.cmd', 'nova_ext', 'cinder_ext')
PRODUCT = ('os_brick_cas', 'nova_ext', 'cinder_ext')
STAND_IN = 'cas_standin'
OPENCAS = 'os_brick_cas.opencas'
#: what the Open CAS facts may import of the rest of the product
OPENCAS_MAY_IMPORT = ('os_brick_cas.exception', 'os_brick_cas.labels',
                      'os_brick_cas.modes', 'os_brick_cas.opts')


def imported(path: str) -> set[str]:
    """The modules the product module at *path* imports."""
    dotted = os.path.relpath(path, TOP)[:-3].replace(os.sep, '.')
    return module_imports(dotted.removesuffix('.__init__'), path,
                          module_files(TOP, PRODUCT))


CINDER_EXT = os.path.join(os.path.dirname(ROOT), 'cinder_ext')
#: what only the operator CLI needs: never loaded by cinder's services
CLI_ONLY = ('os_brick_cas.cmd', 'keystoneauth1', 'cinderclient', 'openstack')
#: modules both cinder-api and compute hosts load: no service imports
SHARED_LEAVES = ('fence_wire.py', 'labels.py',
                 os.path.join('opencas', 'stand_in.py'))
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


def module_files(top: str, packages: Iterable[str]) -> dict[str, str]:
    """Dotted module name -> source path, for every module of *packages*."""
    found = {}
    for package in packages:
        for directory, dirs, files in os.walk(os.path.join(top, package)):
            for name in files:
                if name.endswith('.py'):
                    path = os.path.join(directory, name)
                    dotted = os.path.relpath(path, top)[:-3].replace(
                        os.sep, '.')
                    found[dotted.removesuffix('.__init__')] = path
    return found


def module_imports(dotted: str, path: str, known: Mapping[str, str]
                   ) -> set[str]:
    """Modules *path* imports, relative imports resolved, names to modules.

    ``from a import b`` is the module ``a.b`` where that is a module, else
    the package ``a``; a name that is no known module keeps its longest
    known prefix (an import of the stand-in or a library stays as it is).
    """
    with open(path) as source:
        tree = ast.parse(source.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = dotted.split('.')
                if not path.endswith('__init__.py'):
                    parts = parts[:-1]
                parts = parts[:len(parts) - node.level + 1]
                base = '.'.join(parts + ([base] if base else []))
            names.update('%s.%s' % (base, alias.name)
                         if '%s.%s' % (base, alias.name) in known else base
                         for alias in node.names)
    return {nearest_module(name, known) for name in names}


def nearest_module(name: str, known: Mapping[str, str]) -> str:
    candidate = name
    while candidate and candidate not in known:
        candidate = candidate.rpartition('.')[0]
    return candidate or name


def unit_of(dotted: str) -> str:
    """os_brick_cas.host.prep -> os_brick_cas.host; nova_ext.x -> nova_ext."""
    parts = dotted.split('.')
    return '.'.join(parts[:2]) if parts[0] == 'os_brick_cas' else parts[0]


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


class ImportGraph(object):
    """The product's modules and what each imports (issue 38 point 3)."""

    def __init__(self, top: str = TOP):
        self.known = module_files(top, PRODUCT)
        self.imports = {dotted: module_imports(dotted, path, self.known)
                        for dotted, path in self.known.items()}

    def modules(self) -> dict[str, set[str]]:
        """Module -> the product modules it imports (itself left out)."""
        return {dotted: {name for name in names
                         if name in self.known and name != dotted}
                for dotted, names in self.imports.items()}

    def units(self) -> dict[str, set[str]]:
        graph: dict[str, set[str]] = {}
        for dotted, names in self.modules().items():
            graph.setdefault(unit_of(dotted), set()).update(
                unit_of(name) for name in names
                if unit_of(name) != unit_of(dotted))
        return graph

    def offenders(self, importer, imported) -> dict[str, list[str]]:
        """importer(module) and imported(name) -> what breaks the rule."""
        return {dotted: sorted(name for name in names if imported(name))
                for dotted, names in self.imports.items()
                if importer(dotted) and any(map(imported, names))}


def is_library(dotted: str) -> bool:
    return (dotted.startswith('os_brick_cas') and
            unit_of(dotted) != 'os_brick_cas.cmd')


def under(dotted: str, *packages: str) -> bool:
    return any(dotted == package or dotted.startswith(package + '.')
               for package in packages)


class ImportGraphTestCase(testtools.TestCase):
    """The arrows between the product's packages point one way."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.graph = ImportGraph()

    def test_the_graph_is_read_from_the_whole_product(self):
        # a wrong root would pass every rule below on an empty graph
        for dotted in ('os_brick_cas.opencas.casadm_params',
                       'os_brick_cas.host.prep', 'os_brick_cas.cmd.main',
                       'os_brick_cas.lifecycle.transitions',
                       'nova_ext.driver', 'cinder_ext.guards'):
            self.assertIn(dotted, self.graph.known)
        self.assertIn('os_brick_cas.privileged.casadm',
                      self.graph.modules()['os_brick_cas.casadm'])

    def test_no_module_imports_itself_through_others(self):
        self.assertEqual([], cycles(self.graph.modules()))

    def test_no_cycle_between_packages(self):
        self.assertEqual([], cycles(self.graph.units()))

    def test_library_never_imports_the_cli_or_a_service_plugin(self):
        self.assertEqual({}, self.graph.offenders(
            is_library, lambda name: under(name, *FORBIDDEN)))

    def test_the_product_never_imports_the_stand_in(self):
        self.assertEqual({}, self.graph.offenders(
            lambda dotted: True, lambda name: under(name, STAND_IN)))

    def test_open_cas_facts_import_only_leaf_utilities(self):
        def outside(name):
            return (under(name, *PRODUCT) and not under(name, OPENCAS) and
                    name not in OPENCAS_MAY_IMPORT)
        self.assertEqual({}, self.graph.offenders(
            lambda dotted: under(dotted, OPENCAS), outside))

    def test_the_allowed_leaves_import_nothing_of_the_product(self):
        # what opencas may import must not lead back into the library
        for dotted in OPENCAS_MAY_IMPORT:
            self.assertEqual([], sorted(
                name for name in self.graph.modules()[dotted]
                if name not in OPENCAS_MAY_IMPORT), dotted)


class CyclesTestCase(testtools.TestCase):
    """The cycle finder finds what the graph tests rely on it to find."""

    def test_a_two_node_cycle_and_a_self_free_chain(self):
        self.assertEqual([['a', 'b']], cycles(
            {'a': {'b'}, 'b': {'a', 'c'}, 'c': set()}))
        self.assertEqual([], cycles({'a': {'b'}, 'b': {'c'}}))

    def test_a_longer_cycle_is_one_component(self):
        self.assertEqual([['a', 'b', 'c']], cycles(
            {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}))
