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


"""The role's Open CAS patch series apply, and the alock patch works.

Each ``<release>/series`` names existing patches with a known_defects key;
against the vendored release tarball (``../shared/vendor/open-cas/``
beside the checkout or its main working tree; the test says so and skips
where there is none) each series applies in order with ``patch -p1``, and
the read-lock harness (``tests/alock-read-holders``) finds 255 readers
reaching the write-locked value unpatched and 254 at most patched.
"""

import os
import subprocess
import tarfile
import tempfile

import testtools

from os_brick_cas.opencas import known_defects

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PATCHES = os.path.join(ROOT, 'deploy', 'ansible', 'roles', 'os_brick_cas',
                       'files', 'opencas-patches')
HARNESS = os.path.join(PATCHES, 'tests', 'alock-read-holders', 'run.sh')


def series(release: str) -> list[tuple[str, str]]:
    """(patch file, defect key) lines of a release's series."""
    with open(os.path.join(PATCHES, release, 'series')) as series_file:
        return [tuple(line.split()) for line in series_file
                if line.strip() and not line.startswith('#')]


def vendor_tarball(release: str) -> str:
    """The vendored tarball of *release*, '' when there is none."""
    candidates = [ROOT]
    common = subprocess.run(
        ['git', '-C', ROOT, 'rev-parse', '--path-format=absolute',
         '--git-common-dir'], capture_output=True, text=True)
    if common.returncode == 0:
        candidates.append(os.path.dirname(common.stdout.strip()))
    for repo in candidates:
        path = os.path.join(repo, '..', 'shared', 'vendor', 'open-cas',
                            'open-cas-linux-%s.tar.xz' % release)
        if os.path.exists(path):
            return os.path.realpath(path)
    return ''


class SeriesTestCase(testtools.TestCase):

    def releases(self) -> list[str]:
        return sorted(name for name in os.listdir(PATCHES)
                      if name.startswith('v'))

    def test_every_series_names_patches_and_known_defects(self):
        keys = {defect.key for defect in known_defects.DEFECTS}
        self.assertEqual(['v26.03.2'], self.releases())
        for release in self.releases():
            for name, key in series(release):
                self.assertTrue(os.path.isfile(
                    os.path.join(PATCHES, release, name)), name)
                self.assertIn(key, keys)

    def unpack(self, release: str) -> str:
        tarball = vendor_tarball(release)
        if not tarball:
            self.skipTest('no vendored open-cas-linux-%s.tar.xz' % release)
        if subprocess.run(['which', 'patch', 'gcc'],
                          capture_output=True).returncode:
            self.skipTest('patch or gcc missing')
        tree = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ['rm', '-rf', tree])
        with tarfile.open(tarball) as archive:
            top = archive.getnames()[0].split('/')[0]
            members = [member for member in archive.getmembers()
                       if member.name.startswith(top + '/ocf/')]
            archive.extractall(tree, members=members, filter='data')
        return os.path.join(tree, top)

    def apply(self, tree: str, release: str) -> None:
        for name, _ in series(release):
            done = subprocess.run(
                ['patch', '-p1', '--forward', '--batch', '-i',
                 os.path.join(PATCHES, release, name)], cwd=tree,
                capture_output=True, text=True)
            self.assertEqual(0, done.returncode, done.stdout + done.stderr)

    def harness(self, tree: str) -> subprocess.CompletedProcess:
        return subprocess.run([HARNESS, os.path.join(tree, 'ocf')],
                              capture_output=True, text=True, timeout=300)

    def test_v26_03_2_series_applies_and_limits_read_lock_holders(self):
        tree = self.unpack('v26.03.2')
        before = self.harness(tree)
        self.assertEqual((1, 'readers 255 value 255 write-locked 1\n'),
                         (before.returncode, before.stdout), before.stderr)
        self.apply(tree, 'v26.03.2')
        after = self.harness(tree)
        self.assertEqual((0, 'readers 254 value 254 write-locked 0\n'),
                         (after.returncode, after.stdout), after.stderr)
