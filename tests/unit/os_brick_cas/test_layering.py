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

import os

import testtools

import os_brick_cas
from tests.unit import test_architecture_doc

ROOT = os.path.dirname(os_brick_cas.__file__)
TOP = os.path.dirname(ROOT)
FORBIDDEN = ('os_brick_cas.cmd', 'nova_ext', 'cinder_ext')
PRODUCT = ('os_brick_cas', 'nova_ext', 'cinder_ext')
STAND_IN = 'cas_standin'
OPENCAS = 'os_brick_cas.opencas'
#: what the Open CAS facts may import of the rest of the product
OPENCAS_MAY_IMPORT = ('os_brick_cas.exception', 'os_brick_cas.labels',
                      'os_brick_cas.modes', 'os_brick_cas.opts')


#: the import reader and the cycle finder of tools/architecture-graph.py:
#: one reading of the source for the picture and for these rules
GRAPH_TOOL = test_architecture_doc.tool()


def imported(path: str) -> set[str]:
    """The modules the product module at *path* imports."""
    dotted = os.path.relpath(path, TOP)[:-3].replace(os.sep, '.')
    return ImportGraph.shared().imports[dotted.removesuffix('.__init__')]


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


def unit_of(dotted: str) -> str:
    """os_brick_cas.host.prep -> os_brick_cas.host; nova_ext.x -> nova_ext."""
    parts = dotted.split('.')
    return '.'.join(parts[:2]) if parts[0] == 'os_brick_cas' else parts[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node."""
    return [component for component in GRAPH_TOOL.components(
        {node: set(targets) & set(graph) for node, targets in graph.items()})
        if len(component) > 1]


class ImportGraph(object):
    """The product's modules and what each imports (issue 38 point 3)."""

    _shared = None

    def __init__(self, top: str = TOP):
        files = {dotted: path for package in PRODUCT
                 for dotted, path in GRAPH_TOOL.modules(top, package)}
        self.known = set(files)
        self.imports = {
            dotted: {GRAPH_TOOL.nearest_module(name, self.known)
                     for name in GRAPH_TOOL.imported_names(dotted, path,
                                                           self.known)}
            for dotted, path in files.items()}

    @classmethod
    def shared(cls) -> 'ImportGraph':
        """One reading of the source for every test of this module."""
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

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
        cls.graph = ImportGraph.shared()

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
