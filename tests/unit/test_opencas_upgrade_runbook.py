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

"""The runbook for an Open CAS upgrade with write-back volumes (issue 37).

``doc/source/admin/upgrades.rst`` answers "does the new release load the
old metadata?" with a table of each release's METADATA_VERSION. Its claims
are checked against the vendored release tarballs (``../shared/vendor/
open-cas/``, as tests/unit/test_opencas_patches.py finds them; skipped
where there are none): the version each release writes is its ``version``
file packed as ``(MAIN << 16) + (MAJOR << 8) + MINOR``, and loading
refuses any other with OCF_ERR_METADATA_VER. The page must also say what
is only read in the sources, not run, and keep the steps that protect
dirty data.
"""

import os
import re
import tarfile

import testtools

from tests.unit import test_opencas_patches

ROOT = test_opencas_patches.ROOT
PAGE = os.path.join(ROOT, 'doc', 'source', 'admin', 'upgrades.rst')
SECTION = 'Upgrading Open CAS with write-back volumes attached'


def runbook() -> str:
    """The runbook section of the upgrades page, '' when it is missing."""
    with open(PAGE) as page:
        text = page.read()
    start = text.find('\n%s\n' % SECTION)
    if start < 0:
        return ''
    body = text[start + len(SECTION) + 2:]
    following = re.search(r'\n[^\n]+\n=+\n', body[1:])
    return body[:following.start() + 1] if following else body


def table_rows(section: str) -> dict[str, tuple[str, int]]:
    """release -> (dotted METADATA_VERSION, its hex) of the page's table."""
    rows = re.findall(r'^(v[\d.]+)\s+([\d.]+) \((0x[0-9a-f]+)\)', section,
                      re.MULTILINE)
    return {release: (dotted, int(hexa, 16))
            for release, dotted, hexa in rows}


def release_sources(tarball: str) -> dict[str, str]:
    """The version file and the metadata sources of a release tarball."""
    wanted = ('/version', '/ocf/src/ocf_def_priv.h',
              '/ocf/src/metadata/metadata_superblock.c',
              '/ocf/src/metadata/metadata.c')
    found = {}
    with tarfile.open(tarball) as archive:
        for member in archive:
            for suffix in wanted:
                if member.name.endswith(suffix) and member.name.count(
                        '/') == suffix.count('/'):
                    found[suffix] = archive.extractfile(
                        member).read().decode(errors='replace')
    return found


class UpgradeRunbookTestCase(testtools.TestCase):

    def test_the_runbook_answers_whether_old_metadata_loads(self):
        # before the issue-37 work: no such section
        section = ' '.join(runbook().split())
        self.assertTrue(section, 'upgrades.rst has no "%s"' % SECTION)
        self.assertIn('does not load the old release\'s cache metadata',
                      section)
        # what is known and how: read in the sources, not run
        self.assertIn('read, not run in the real-kernel tier', section)
        # the steps that keep dirty data: flush and stop with the OLD
        # release, check the device is clean, never --force the zeroing,
        # and the way back when dirty data was left behind
        for step in ('os-brick-cas drain --all', 'casadm -T -i ID',
                     '``Cache dirty`` ``no``', 'never add ``--force``',
                     'Reinstall the old release'):
            self.assertIn(step, section)
        order = [section.index(step) for step in (
            'casadm -T -i ID', '#. Install the new release',
            'casadm --zero-metadata')]
        self.assertEqual(sorted(order), order)
        # the module section's order links to it
        with open(PAGE) as page:
            self.assertIn('`Upgrading Open CAS with write-back volumes '
                          'attached`_', ' '.join(page.read().split()))

    def test_each_release_row_matches_its_sources(self):
        rows = table_rows(runbook())
        self.assertEqual({'v24.9', 'v25.12.2', 'v26.03.2'}, set(rows))
        checked = 0
        for release, (dotted, packed) in sorted(rows.items()):
            tarball = test_opencas_patches.vendor_tarball(release)
            if not tarball:
                continue
            sources = release_sources(tarball)
            version = dict(re.findall(r'^CAS_VERSION_(\w+)=(\d+)$',
                                      sources['/version'], re.MULTILINE))
            main, major, minor = (int(version[key]) for key in
                                  ('MAIN', 'MAJOR', 'MINOR'))
            self.assertEqual('%d.%d.%d' % (main, major, minor), dotted,
                             release)
            self.assertEqual((main << 16) + (major << 8) + minor, packed,
                             release)
            # the packing the page states, as the release defines it
            self.assertRegex(
                sources['/ocf/src/ocf_def_priv.h'],
                r'#define METADATA_VERSION\(\) \(\(OCF_VERSION_MAIN << 16\)'
                r' \+ \\\s*\(OCF_VERSION_MAJOR << 8\) \+ OCF_VERSION_MINOR\)',
                release)
            # loading refuses any other version, in both load paths
            for path in ('/ocf/src/metadata/metadata_superblock.c',
                         '/ocf/src/metadata/metadata.c'):
                self.assertRegex(
                    sources[path], r'METADATA_VERSION\(\) != superblock->'
                    r'metadata_version\)[^}]{0,200}?OCF_ERR_METADATA_VER',
                    '%s %s' % (release, path))
            checked += 1
        if not checked:
            self.skipTest('no vendored Open CAS tarball (../shared/vendor/'
                          'open-cas/): the table is not compared')
