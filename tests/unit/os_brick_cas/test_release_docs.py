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

"""The version, the release notes and the reference text agree (issue 37).

Each test names what it keeps out; each failed on main before the fix.
"""

import configparser
import glob
import os
import re

import testtools
import yaml

from os_brick_cas import fence_wire as wire
from os_brick_cas import rbd_names
from os_brick_cas import version

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def read(relative: str) -> str:
    with open(os.path.join(REPO, relative)) as text:
        return text.read()


def flat(relative: str) -> str:
    return ' '.join(read(relative).split())


def setup_cfg_version() -> str:
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, 'setup.cfg'))
    return parser.get('metadata', 'version', fallback='')


def docs() -> dict[str, str]:
    paths = ['README.rst'] + sorted(
        os.path.relpath(path, REPO) for path in
        glob.glob(os.path.join(REPO, 'doc/source/**/*.rst'), recursive=True))
    return {path: flat(path) for path in paths}


def notes() -> dict[str, str]:
    return {os.path.basename(path): ' '.join(open(path).read().split())
            for path in glob.glob(os.path.join(REPO, 'releasenotes/notes/'
                                               '*.yaml'))}


class VersionTestCase(testtools.TestCase):

    def test_a_release_number_that_survives_a_clone_without_tags(self):
        # main: no version anywhere but git tags, none of which CI's clone
        # has: "0.0.1.devN", notes under "0.0.0", README spoke of 1.2.0
        number = setup_cfg_version()
        self.assertRegex(number, r'^[1-9]\d*\.\d+\.\d+$')
        # pbr: the number on its tag, a pre-release of it before (the
        # editable install reads setup.cfg when tools/setup-env.sh runs)
        self.assertRegex(version.version_string(),
                         r'^%s(\.dev\d+)?$' % re.escape(number))
        reno = yaml.safe_load(read('releasenotes/config.yaml'))
        self.assertEqual(number, reno['unreleased_version_title'])
        self.assertIn(number, read('releasenotes/source/unreleased.rst'))
        for path, text in docs().items():
            for other in re.findall(r'``(\d+\.\d+\.\d+)(?:\.devN)?`` on the '
                                    r'tag', text):
                self.assertEqual(number, other, path)

    def test_the_man_page_is_not_advertised_as_installed(self):
        # main: "also as the man page os-brick-cas(8)", which no package
        # installs (setup.cfg data_files has no share/man)
        self.assertNotIn('share/man', read('setup.cfg'))
        for path, text in docs().items():
            for sentence in re.findall(r'[^.]*os-brick-cas\(8\)[^.]*\.',
                                       text):
                self.assertIn('not install', sentence, path)


class StaleTextTestCase(testtools.TestCase):

    def test_no_document_cites_a_file_outside_the_repository(self):
        # main: the tuning page cited ../shared/docs/opencas-cli.md
        for path, text in docs().items():
            self.assertNotIn('../shared/docs', text, path)
            self.assertIsNone(re.search(r'\(opencas-cli\.md|opencas-cli\.md'
                                        r'\)', text), path)

    def test_devstack_note_names_the_plugins_default_release(self):
        # main: the note said v26.03.2, devstack/settings says v25.12.2
        default = re.search(r'OPEN_CAS_BRANCH=\$\{OPEN_CAS_BRANCH:-([^}]+)\}',
                            read('devstack/settings')).group(1)
        text = notes()['devstack-plugin-2f6a8c0e4b1d9e73.yaml']
        self.assertIn('(default ``%s``)' % default, text)

    def test_notes_name_the_tempest_group_and_no_shim_install(self):
        # main: "fills tempest's [os_brick_cas] group" (it is
        # [os_brick_cas_tempest]) and "Install the driver shim with
        # os-brick-cas nova-shim install" (a no-op since the .pth hook)
        from os_brick_cas_tempest_plugin import config as tempest_config
        group = tempest_config.os_brick_cas_group.name
        for name, text in notes().items():
            for found in re.findall(r"tempest's ``\[(\w+)\]`` group", text):
                self.assertEqual(group, found, name)
            if 'nova-hook-without-shim-file' not in name:
                self.assertNotIn('Install the driver shim', text, name)
                self.assertNotIn('installs the nova shim', text, name)

    def test_reference_text_names_the_current_link_and_fence_keys(self):
        # main: conventions/architecture showed the 1.x by-id name
        # rbd-<pool>-<image> as the current one and the fence marker as
        # one key holding the host
        for path in ('doc/source/contributor/conventions.rst',
                     'doc/source/architecture.rst'):
            text = flat(path)
            self.assertIn('/dev/disk/by-id/%s<fsid>' % rbd_names.PREFIX,
                          text, path)
            self.assertNotRegex(text, r'by-id/rbd-<pool>-<image>`` \(',
                                path)
        text = flat('doc/source/contributor/conventions.rst')
        for key in ('os_brick_cas_fence', 'os_brick_cas_fence_epoch',
                    'os_brick_cas_fence_drained', 'os_brick_cas_fence_lost',
                    wire.ATTRIBUTE, wire.EPOCH_ATTRIBUTE,
                    wire.DRAINED_ATTRIBUTE, wire.LOST_ATTRIBUTE):
            self.assertIn('``%s``' % key, text)

    def test_a_sizing_section_for_buying_a_cache(self):
        # main: nothing said how large a cache to buy for a working set
        text = flat('doc/source/admin/tuning.rst')
        self.assertIn('How large a cache to buy', text)
        self.assertIn('working set', text)
        self.assertIn('size_gib', text)

    def test_demo_sh_prints_no_build_warnings_before_its_output(self):
        # main: ~50 lines of setuptools notices (license classifier
        # deprecation three times, editable-install warning) on every run
        setup_env = read('tools/setup-env.sh')
        [install] = [line for line in setup_env.splitlines()
                     if '--no-deps -e .' in line]
        self.assertIn('PYTHONWARNINGS=ignore', install)
        self.assertNotIn('License ::', read('setup.cfg'))


class ReadmeTestCase(testtools.TestCase):

    def test_readme_is_what_a_newcomer_needs_and_links_the_rest(self):
        # main: ~1400 lines; the two commands, the support matrix and the
        # architecture lost among benchmark tables and tier details
        readme = read('README.rst')
        self.assertLess(len(readme.splitlines()), 150)
        titles = re.findall(r'\n([^\n]+)\n=+\n', readme)
        self.assertEqual(['Quick start (fresh machine, Python 3.11, Debian '
                          '12, as root)', 'Support matrix', 'Architecture',
                          'Documentation'], titles[1:5])
        for command in ('    tools/demo.sh\n', '    tools/run-tests.sh\n'):
            self.assertIn(command, readme)
        for path in re.findall(r'``((?:doc/source|releasenotes)/[^`]*)``',
                               readme):
            self.assertTrue(os.path.exists(os.path.join(REPO, path)), path)
        # what left README is in the rendered docs
        for page, heading in (('doc/source/testing.rst',
                               'The real-kernel tier'),
                              ('doc/source/benchmarks.rst', 'Benchmarks'),
                              ('doc/source/admin/host-guide.rst',
                               'Supported OpenStack releases')):
            self.assertIn('\n%s\n' % heading, read(page))
