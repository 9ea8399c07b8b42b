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

"""doc/source/architecture.rst cannot drift from the code.

Its import graph is what tools/architecture-graph.py generates now, and
every ``module.function`` its flows name exists (read with ast, so nova
and cinder need not be importable).
"""

import ast
import importlib.util
import os
import re
from typing import Optional

import fixtures
import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DOC = os.path.join(ROOT, 'doc', 'source', 'architecture.rst')
#: the flows, and how many code references each must name at least
FLOWS = {'Attach': 8, 'Drain': 6, 'Host apply': 6}
LITERAL = re.compile(r'``([A-Za-z_][\w.]*)``')


def tool():
    spec = importlib.util.spec_from_file_location(
        'architecture_graph', os.path.join(ROOT, 'tools',
                                           'architecture-graph.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_doc() -> str:
    with open(DOC) as doc:
        return doc.read()


def section(text: str, title: str) -> str:
    """The body of the ``=``-underlined section *title*."""
    match = re.search(r'^%s\n=+\n(.*?)(?=^[^\n]+\n=+\n|\Z)' % re.escape(
        title), text, re.MULTILINE | re.DOTALL)
    if match is None:
        raise AssertionError('architecture.rst has no section %r' % title)
    return match.group(1)


def module_path(parts: list[str]) -> Optional[str]:
    base = os.path.join(ROOT, *parts)
    for path in (base + '.py', os.path.join(base, '__init__.py')):
        if os.path.isfile(path):
            return path
    return None


def defines(body: list[ast.stmt], name: str) -> Optional[list[ast.stmt]]:
    """The body of class/function *name* in *body* ([] for a variable)."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.name == name:
            return node.body
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return []
    return None


def exists(dotted: str) -> bool:
    """Whether *dotted* names a module, or a definition inside one."""
    parts = dotted.split('.')
    for cut in range(len(parts), 0, -1):
        path = module_path(parts[:cut])
        if path is None:
            continue
        with open(path) as source:
            body = ast.parse(source.read(), path).body
        for name in parts[cut:]:
            found = defines(body, name)
            if found is None:
                return False
            body = found
        return True
    return False


class ArchitectureDocTestCase(testtools.TestCase):

    def test_the_package_picture_is_the_generated_one(self):
        graph = tool()
        self.assertEqual(
            graph.render(ROOT), graph.current(read_doc()),
            'doc/source/architecture.rst: the package picture differs from '
            'the code; refresh it with: %s' % graph.REFRESH)

    def test_every_named_function_of_the_flows_exists(self):
        text = read_doc()
        packages = tool().product_packages(ROOT)
        missing = []
        for title, least in FLOWS.items():
            names = [name for name in LITERAL.findall(section(text, title))
                     if name.split('.')[0] in packages and '.' in name]
            self.assertGreaterEqual(len(set(names)), least, title)
            missing += ['%s: %s' % (title, name) for name in names
                        if not exists(name)]
        where = section(text, 'Where to find things')
        missing += ['Where to find things: %s' % name
                    for name in LITERAL.findall(where)
                    if name.split('.')[0] in packages and not exists(name)]
        self.assertEqual([], missing, 'architecture.rst names code that '
                                      'does not exist (moved or renamed?)')

    def test_the_checker_finds_what_is_missing(self):
        # (packages the layout change leaves where they are)
        self.assertTrue(exists('os_brick_cas.lifecycle.states.ROWS'))
        self.assertTrue(exists(
            'os_brick_cas.lifecycle.transitions.Lifecycle.drain'))
        self.assertTrue(exists('os_brick_cas.privileged.casadm.add_core'))
        self.assertFalse(exists(
            'os_brick_cas.lifecycle.transitions.Lifecycle.no_such'))
        self.assertFalse(exists('os_brick_cas.no_such_module.attach'))

    def test_the_graph_of_a_small_tree(self):
        root = self.useFixture(fixtures.TempDir()).path
        files = {
            'lib/__init__.py': '',
            'lib/leaf.py': 'import os\n',
            'lib/core.py': 'from lib import leaf\n',
            'lib/sub/__init__.py': '',
            'lib/sub/deep.py': 'def f():\n    from lib import core\n',
            'lib/sub/deeper/__init__.py': 'from .. import deep\n',
            'ext/__init__.py': 'from lib.sub import deep\n',
            'tests/__init__.py': 'import ext\n',
        }
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as out:
                out.write(text)
        graph = tool()
        self.assertEqual(['ext', 'lib'], graph.product_packages(root))
        self.assertEqual({'lib': set(), 'lib.leaf': set(),
                          'lib.core': {'lib.leaf'},
                          'lib.sub': {'lib.core'}, 'ext': {'lib.sub'}},
                         graph.graph(root))
        layers = graph.layers({'a': {'b'}, 'b': {'c'}, 'c': set(),
                               'd': {'e'}, 'e': {'d'}})
        self.assertEqual([[['c'], ['d', 'e']], [['b']], [['a']]], layers)
