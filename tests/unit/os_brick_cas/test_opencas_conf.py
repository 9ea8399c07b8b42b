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

import os
import stat
import subprocess
import sys
from unittest import mock

from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
from os_brick_cas.privileged import devices as priv_devices
from tests import casctl_conf_checker as checker
from tests.unit.os_brick_cas import base


TEMPLATE = """version=19.3.0
# comment kept
[caches]
## Cache ID\tCache device\tCache mode\tExtra fields (optional)
1\t/dev/disk/by-id/nvme-Optane-part1\tWT
2\t/dev/disk/by-id/nvme-Optane-part2\tWB\tcleaning_policy=acp
[cores]
## Cache ID\tCore ID\tCore device
2\t1\t/dev/disk/by-id/rbd-volumes-volume-a\tlazy_startup=true
"""

A = '/dev/disk/by-id/rbd-volumes-volume-a'
B = '/dev/disk/by-id/rbd-volumes-volume-b'


class OpenCasConfTestCase(base.TestCase):

    def rewrite(self, text, **change):
        """rewrite() whose result casctl's rules must accept."""
        new_text = opencas_conf.rewrite(text, **change)
        checker.check(new_text)
        return new_text

    def write(self, path, text=TEMPLATE):
        with open(path, 'w') as conf_file:
            conf_file.write(text)

    def read_text(self, path):
        with open(path) as conf_file:
            return conf_file.read()

    def test_parse(self):
        parsed = opencas_conf.parse(TEMPLATE)
        self.assertEqual({1: 'WT', 2: 'WB'}, parsed.caches)
        self.assertTrue(parsed.lists_core(2, 1, A))
        self.assertFalse(parsed.lists_core(2, 1, '/dev/disk/by-id/other'))

    def test_add_keeps_everything_else(self):
        row = opencas_conf.CoreRow(2, 2, B)
        text = self.rewrite(TEMPLATE, add=row)
        self.assertEqual(TEMPLATE + '2\t2\t%s\tlazy_startup=true\n' % B,
                         text)

    def test_add_replaces_same_core_and_remove(self):
        row = opencas_conf.CoreRow(2, 1, B)
        text = self.rewrite(TEMPLATE, add=row)
        self.assertEqual({(2, 1): B}, opencas_conf.parse(text).cores)
        removed = self.rewrite(text, remove=row)
        self.assertEqual({}, opencas_conf.parse(removed).cores)
        self.assertIn('cleaning_policy=acp', removed)
        self.assertIn('# comment kept', removed)
        self.assertTrue(removed.startswith('version=19.3.0\n'))

    def test_add_creates_cores_section(self):
        text = self.rewrite('version=19.3.0\n[caches]\n1\t/d\tWB\n',
                            add=opencas_conf.CoreRow(1, 0, '/x'))
        self.assertEqual({(1, 0): '/x'}, opencas_conf.parse(text).cores)

    # -- issue 12 point 4 ------------------------------------------------
    def test_remove_needs_cache_core_and_device(self):
        # the row race: core 2/1 was freed by A's detach and given to B;
        # A's late forget must not delete B's row
        text = self.rewrite(TEMPLATE, add=opencas_conf.CoreRow(2, 1, B))
        for stale in (opencas_conf.CoreRow(2, 1, A),
                      opencas_conf.CoreRow(1, 1, B),
                      opencas_conf.CoreRow(2, 2, B)):
            self.assertEqual(text, opencas_conf.rewrite(text, remove=stale))
        self.assertEqual({}, opencas_conf.parse(self.rewrite(
            text, remove=opencas_conf.CoreRow(2, 1, B))).cores)

    def test_core_row_for_unlisted_cache_is_refused(self):
        exc = self.assertRaises(exception.OpenCasConfRefused,
                                opencas_conf.rewrite, TEMPLATE,
                                add=opencas_conf.CoreRow(3, 1, B))
        self.assertIn('cache instance 3 is not listed under [caches]',
                      str(exc))

    def test_device_listed_under_another_core_is_refused(self):
        for other in ((2, 2), (1, 1)):
            exc = self.assertRaises(exception.OpenCasConfRefused,
                                    opencas_conf.rewrite, TEMPLATE,
                                    add=opencas_conf.CoreRow(*other, A))
            self.assertIn('already listed as core 1 of cache instance 2',
                          str(exc))

    def test_device_moving_rows_in_one_rewrite_is_allowed(self):
        text = self.rewrite(TEMPLATE, add=opencas_conf.CoreRow(2, 5, A),
                            remove=opencas_conf.CoreRow(2, 1, A))
        self.assertEqual({(2, 5): A}, opencas_conf.parse(text).cores)

    def test_missing_file_gets_no_versionless_file(self):
        path = os.path.join(self.tmp, 'missing.conf')
        self.assertRaises(exception.OpenCasConfRefused,
                          opencas_conf.update_file, path,
                          add=opencas_conf.CoreRow(2, 1, A))
        self.assertFalse(os.path.exists(path))

    def test_version_must_stay_first(self):
        text = '# my notes\n' + TEMPLATE
        exc = self.assertRaises(exception.OpenCasConfRefused,
                                opencas_conf.rewrite, text,
                                add=opencas_conf.CoreRow(2, 2, B))
        self.assertIn('first line is not version=', str(exc))

    def test_sections_as_casctl_reads_them(self):
        # casctl knows only the exact lines [caches] and [cores]
        text = TEMPLATE.replace('[cores]', '[cores]  # ours')
        new_text = self.rewrite(text, add=opencas_conf.CoreRow(2, 2, B))
        self.assertEqual({(2, 1): A, (2, 2): B},
                         opencas_conf.parse(new_text).cores)

    def test_update_file_atomic_keeps_mode(self):
        path = os.path.join(self.tmp, 'opencas.conf')
        self.write(path)
        os.chmod(path, 0o600)
        opencas_conf.update_file(path, remove=opencas_conf.CoreRow(2, 1, A))
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        self.assertEqual({}, opencas_conf.read(path).cores)
        self.assertEqual(['opencas.conf'], os.listdir(self.tmp))
        checker.check_file(path)

    def test_missing_file(self):
        path = os.path.join(self.tmp, 'missing.conf')
        self.assertEqual({}, opencas_conf.read(path).caches)
        opencas_conf.update_file(path, remove=opencas_conf.CoreRow(1, 1, A))
        self.assertFalse(os.path.exists(path))

    def test_directory_is_fsynced_after_rename(self):
        path = os.path.join(self.tmp, 'opencas.conf')
        self.write(path)
        synced = []
        real_fsync = os.fsync

        def spy(fd):
            synced.append((stat.S_ISDIR(os.fstat(fd).st_mode),
                           self.read_text(path)))
            return real_fsync(fd)

        with mock.patch.object(os, 'fsync', side_effect=spy):
            opencas_conf.update_file(path, add=opencas_conf.CoreRow(2, 2, B))
        # the directory is synced, and only once the new file is in place
        self.assertIn((True, self.read_text(path)), synced)
        self.assertIn(B, self.read_text(path))

    def _dead_writer_temp(self, directory, prefix):
        """A temp file left by a writer process that is gone."""
        code = ('import os, sys, tempfile\n'
                'prefix = sys.argv[2].replace("PID", str(os.getpid()))\n'
                'fd, name = tempfile.mkstemp(dir=sys.argv[1], prefix=prefix)'
                '\nos.write(fd, b"half")\nprint(name)\nos._exit(0)\n')
        return subprocess.run([sys.executable, '-c', code, directory, prefix],
                              check=True, capture_output=True,
                              text=True).stdout.strip()

    def test_temp_files_of_killed_writers_are_swept(self):
        path = os.path.join(self.tmp, 'opencas.conf')
        self.write(path)
        dead = self._dead_writer_temp(self.tmp, '.opencas.conf.PID.')
        legacy = self._dead_writer_temp(self.tmp, '.opencas.conf.')
        living = subprocess.Popen([sys.executable, '-c',
                                   'import time; time.sleep(60)'])
        self.addCleanup(living.wait)
        self.addCleanup(living.kill)
        busy = os.path.join(self.tmp, '.opencas.conf.%d.x1' % living.pid)
        self.write(busy, 'in progress')
        others = os.path.join(self.tmp, 'opencas.conf.bak')
        self.write(others, 'kept')
        opencas_conf.update_file(path, add=opencas_conf.CoreRow(2, 2, B))
        self.assertFalse(os.path.exists(dead))
        self.assertFalse(os.path.exists(legacy))
        self.assertTrue(os.path.exists(busy))
        self.assertTrue(os.path.exists(others))

    def test_symlink_is_written_through(self):
        real_dir = os.path.join(self.tmp, 'real')
        os.mkdir(real_dir)
        target = os.path.join(real_dir, 'opencas.conf')
        self.write(target)
        os.chmod(target, 0o640)
        link = os.path.join(self.tmp, 'opencas.conf')
        os.symlink(os.path.join('real', 'opencas.conf'), link)
        opencas_conf.update_file(link, add=opencas_conf.CoreRow(2, 2, B))
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.path.join('real', 'opencas.conf'),
                         os.readlink(link))
        self.assertIn(B, self.read_text(target))
        self.assertEqual(0o640, stat.S_IMODE(os.stat(target).st_mode))
        self.assertEqual(['opencas.conf'], os.listdir(real_dir))
        checker.check_file(target)


class PrivilegedEntryPointsTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        with open(self.opencas_conf, 'w') as conf_file:
            conf_file.write(TEMPLATE)

    def test_forget_core_needs_the_device(self):
        priv_devices.forget_core(2, 1, B)
        self.assertEqual({(2, 1): A},
                         opencas_conf.read(self.opencas_conf).cores)
        priv_devices.forget_core(2, 1, A)
        self.assertEqual({}, opencas_conf.read(self.opencas_conf).cores)
        checker.check_file(self.opencas_conf)

    def test_record_core_refuses_a_second_row_for_a_device(self):
        self.assertRaises(exception.OpenCasConfRefused,
                          priv_devices.record_core, 2, 2, A)
        self.assertEqual(TEMPLATE, open(self.opencas_conf).read())

    def test_arguments_are_validated(self):
        for args in (('2', 1, A), (2, True, A), (2, 1, '/etc/passwd'),
                     (2, 1, '/dev/disk/by-id/../sda'), (0, 1, A)):
            self.assertRaises(exception.InvalidInput,
                              priv_devices.forget_core, *args)
            self.assertRaises(exception.InvalidInput,
                              priv_devices.record_core, *args)
        self.assertEqual(TEMPLATE, open(self.opencas_conf).read())


class CheckerTestCase(base.TestCase):
    """The checker itself rejects what casctl rejects."""

    def test_rejects(self):
        bad = {
            'no version': TEMPLATE.split('\n', 1)[1],
            'unlisted cache': TEMPLATE + '3\t1\t%s\n' % B,
            'device twice': TEMPLATE + '2\t2\t%s\n' % A,
            'core twice': TEMPLATE + '2\t1\t%s\n' % B,
            'bad option': TEMPLATE + '2\t2\t%s\tlazy=true\n' % B,
            'core id': TEMPLATE + '2\t4096\t%s\n' % B,
            'columns': TEMPLATE + '2\t2\n',
            'cache as core': TEMPLATE + '2\t2\t/dev/disk/by-id/'
                                        'nvme-Optane-part1\n',
        }
        for name, text in bad.items():
            self.assertRaises(checker.Rejected, checker.check, text)
        checker.check(TEMPLATE)


class DropCachesTestCase(base.TestCase):
    """What ``host stop``/``host forget`` leave for casctl."""

    def test_drops_rows_and_core_rows_of_the_ids_only(self):
        text = TEMPLATE + '1\t1\t%s\n' % B
        new_text = opencas_conf.drop_caches(text, [2])
        checker.check(new_text)
        self.assertNotIn('nvme-Optane-part2', new_text)
        self.assertNotIn(A, new_text)
        self.assertIn('1\t/dev/disk/by-id/nvme-Optane-part1\tWT\n', new_text)
        self.assertIn('1\t1\t%s\n' % B, new_text)
        self.assertIn('# comment kept\n', new_text)
        self.assertIn('## Cache ID\tCore ID\tCore device\n', new_text)

    def test_unknown_ids_change_nothing(self):
        self.assertEqual(TEMPLATE, opencas_conf.drop_caches(TEMPLATE, [7]))
