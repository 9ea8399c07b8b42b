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

"""Issue 37: one page documents the shared directories; others link to it.

The lifecycle, monitoring, kolla and devstack pages and README each had
their own (four different) permission recipes.
"""

import glob
import os
import re

import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
THE_PAGE = os.path.join('doc', 'source', 'admin', 'shared-directories.rst')
#: pages that speak of the shared directories and must link to the page
LINKING = {
    os.path.join('doc', 'source', 'admin', 'lifecycle.rst'),
    os.path.join('doc', 'source', 'admin', 'monitoring.rst'),
    os.path.join('doc', 'source', 'install', 'kolla-ansible.rst'),
    os.path.join('doc', 'source', 'install', 'ansible-role.rst'),
    os.path.join('doc', 'source', 'install', 'index.rst'),   # devstack
    'README.rst',
}
#: a command that makes or changes one of the shared directories
RECIPE = re.compile(
    r'(install\s+-d|mkdir|chmod|chown|chgrp)[^\n]*'
    r'(lifecycle|/events|/locks|lock_path|os-brick-cas/lock)'
    r'|\b2770\b')


def pages() -> list[str]:
    found = glob.glob(os.path.join(ROOT, 'doc', 'source', '**', '*.rst'),
                      recursive=True)
    return sorted(os.path.relpath(p, ROOT) for p in found) + ['README.rst']


class SharedDirectoriesDocTestCase(testtools.TestCase):

    def read(self, page: str) -> str:
        with open(os.path.join(ROOT, page)) as text:
            return text.read()

    def test_only_one_page_carries_the_recipe(self):
        own = {page: RECIPE.search(self.read(page)).group(0)
               for page in pages()
               if page != THE_PAGE and RECIPE.search(self.read(page))}
        self.assertEqual({}, own, 'these pages carry their own recipe for '
                                  'the shared directories; link to %s'
                         % THE_PAGE)
        self.assertRegex(self.read(THE_PAGE),
                         r'install -d -o root -g nova -m 2770')

    def test_pages_link_to_it(self):
        missing = [page for page in sorted(LINKING)
                   if 'shared-directories' not in self.read(page)]
        self.assertEqual([], missing)
