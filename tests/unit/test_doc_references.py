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

"""References to a README section name one README has (issue 37).

README was cut to what a newcomer needs; the sections it lost moved into
doc/source. A reference such as ``README, "Known data-loss defect"`` in a
document, a comment, an option's help (the generated config samples), a
doctor message or a release note must still lead somewhere: it names a
title of README.rst, or it points at the page that holds the text now.
"""

import os
import re
import subprocess

import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
#: README[.rst] [,(] [section] "Title" or *Title*
REFERENCE = re.compile(r'README(?:\.rst)?`{0,2}[\s,(:]*(?:section\s*)?'
                       r'[*"]([A-Z][^"*]{2,80}?)[*"]')


def flattened(text: str) -> str:
    """*text* with Python string and comment continuations joined."""
    text = re.sub(r"'\s*\n\s*'", '', text)
    return re.sub(r'\n\s*(?:#:?|//|\*)?\s*', ' ', text)


def readme_titles() -> set[str]:
    with open(os.path.join(ROOT, 'README.rst')) as readme:
        text = readme.read()
    return {title.strip() for title in
            re.findall(r'^([^\n]+)\n[=\-~^]{3,}$', text, re.MULTILINE)}


def shipped_files() -> list[str]:
    """The repository's files (git's list; the walk where git is not)."""
    listed = subprocess.run(['git', '-C', ROOT, 'ls-files'],
                            capture_output=True, text=True)
    if listed.returncode == 0:
        return listed.stdout.split()
    return [os.path.relpath(os.path.join(top, name), ROOT)
            for top, dirs, names in os.walk(ROOT)
            if '/.' not in top and '/doc/build' not in top
            for name in names]


class ReadmeReferencesTestCase(testtools.TestCase):

    def test_every_readme_section_named_exists(self):
        titles = readme_titles()
        self.assertIn('Support matrix', titles)
        stale = []
        for path in shipped_files():
            if path.startswith(('tests/', '.')) or path == 'README.rst':
                continue
            try:
                with open(os.path.join(ROOT, path)) as handle:
                    text = handle.read()
            except (UnicodeDecodeError, IsADirectoryError,
                    FileNotFoundError):
                continue
            if 'README' not in text:
                continue
            stale.extend('%s: README "%s"' % (path, ' '.join(title.split()))
                         for title in REFERENCE.findall(flattened(text))
                         if ' '.join(title.split()) not in titles)
        self.assertEqual([], stale)

    def test_the_pattern_finds_the_forms_in_use(self):
        found = [REFERENCE.findall(flattened(text)) for text in (
            '# lose wb writes (README, "Known\n# data-loss defect"): wb',
            "help='writes (README, '\n             '\"Known data-loss\"",
            'See ``README.rst`` (section *Devstack*): enable',
            'README "Supported OpenStack releases" has')]
        self.assertEqual([['Known data-loss defect'], ['Known data-loss'],
                          ['Devstack'], ['Supported OpenStack releases']],
                         found)
