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

"""Packaging: pbr version from git tags, requirements, installed files."""

import configparser
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import fixtures
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
import testtools

from os_brick_cas.host import installed_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CONSTRAINTS = os.path.join(ROOT, 'tools', 'upper-constraints.txt')


def _constraints_tool():
    """tools/generate-upper-constraints.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location(
        'generate_upper_constraints',
        os.path.join(ROOT, 'tools', 'generate-upper-constraints.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def requirements() -> list[Requirement]:
    """The project's requirements, read as the constraints tool reads them."""
    return _constraints_tool().requirements()


def setup_py(cwd: str, *args: str) -> str:
    return subprocess.run([sys.executable, 'setup.py', '-q'] + list(args),
                          cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


class RequirementsTestCase(testtools.TestCase):

    def test_lower_bounds_only(self):
        for req in requirements():
            for spec in req.specifier:
                self.assertEqual('>=', spec.operator,
                                 '%s: only lower bounds in the requirement '
                                 'files; pin the tested version in '
                                 'tools/upper-constraints.txt' % req)

    def test_every_requirement_is_constrained(self):
        with open(CONSTRAINTS) as constraints:
            pinned = {canonicalize_name(line.split('===')[0])
                      for line in constraints if '===' in line}
        missing = [req.name for req in requirements()
                   if canonicalize_name(req.name) not in pinned]
        self.assertEqual([], missing,
                         'not in tools/upper-constraints.txt: run '
                         'tools/generate-upper-constraints.py')


class InstalledFilesTestCase(testtools.TestCase):

    def test_udev_rule_and_rootwrap_filter_where_operators_look(self):
        prefix = self.useFixture(fixtures.TempDir()).path
        setup_py(ROOT, 'install_data', '--install-dir', prefix)
        self.addCleanup(shutil.rmtree, os.path.join(ROOT, 'build'), True)
        share = os.path.join(prefix, 'share', 'os-brick-cas', 'etc')
        for path in ('udev/rules.d/60-os-brick-cas-rbd.rules',
                     'nova/rootwrap.d/os-brick-cas.filters',
                     'cinder/os-brick-cas-policy.yaml.sample',
                     'os-brick-cas/os-brick-cas.conf.sample'):
            self.assertTrue(os.path.isfile(os.path.join(share, path)), path)
        # every file "os-brick-cas host install-files" installs, the
        # exporter's unit among them, where it looks for it
        for path, _ in installed_files.SOURCES.values():
            self.assertTrue(os.path.isfile(os.path.join(share, path)), path)


class VersionFromGitTagsTestCase(testtools.TestCase):

    def test_version_is_setup_cfgs_dev_before_its_tag_exact_at_it(self):
        # pbr pre-versioning: setup.cfg names the next release; a clone
        # without tags (CI's) is a .devN of it, its tag makes it exact
        if shutil.which('git') is None:
            self.skipTest('needs git')
        parser = configparser.ConfigParser()
        parser.read(os.path.join(ROOT, 'setup.cfg'))
        release = parser['metadata']['version']
        self.assertRegex(release, r'^[1-9][0-9]*\.[0-9]+\.[0-9]+$')
        clone = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        subprocess.run(['git', 'clone', '-q', '--no-tags', ROOT, clone],
                       check=True)
        self.assertRegex(setup_py(clone, '--version').strip(),
                         r'^%s\.dev[0-9]+$' % re.escape(release))
        git = ['git', '-C', clone, '-c', 'user.name=t', '-c',
               'user.email=t@example.com']
        subprocess.run(git + ['tag', '-a', release, '-m', release],
                       check=True)
        self.assertEqual(release, setup_py(clone, '--version').strip())
