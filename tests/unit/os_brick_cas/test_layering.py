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
