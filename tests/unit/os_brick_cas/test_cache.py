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

import errno

import fixtures

from os_brick_cas import cache
from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas.opencas import opencas_conf
from tests.unit.os_brick_cas import base

WT = modes.CacheMode.WRITE_THROUGH
WB = modes.CacheMode.WRITE_BACK
LINK = '/dev/disk/by-id/rbd-volumes-volume-1'
CONF_TEXT = ('version=19.3.0\n[caches]\n1\t/dev/disk/by-id/nvme-p1\tWT\n'
             '2\t/dev/disk/by-id/nvme-p2\tWB\n[cores]\n')


def stats(dirty: int) -> tuple[int, str, str]:
    return 0, ('Core Id,Core Device,Exported Object,Dirty [4KiB Blocks],'
               'Status\n1,%s,-,%d,Inactive\n' % (LINK, dirty)), ''


class VolumeCacheTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())
        # krbd identity (sysfs) is covered by test_identity and the
        # functional tier; here the device behind a link is taken as right
        for name in ('verify_device', 'verify_link'):
            self.useFixture(fixtures.MockPatch(
                'os_brick_cas.identity.' + name))
        self.set_instances('wt:1,wb:2')
        with open(self.opencas_conf, 'w') as conf_file:
            conf_file.write(CONF_TEXT)
        # no drained cores: the IO-class table casadm shows by default
        self.fake.reply('--io-class --list', (
            0, 'IO class id,IO class name,Eviction priority,Allocation\n'
               '0,unclassified,255,1.00\n', ''))
        self.cache = cache.VolumeCache()

    def host(self, *core_rows: str) -> None:
        rows = ['cache,1,/dev/nvme0n1p1,Running,wt,-']
        rows += [r for r in core_rows if r.startswith('core,1')]
        rows += ['cache,2,/dev/nvme0n1p2,Running,wb,-']
        rows += [r for r in core_rows if r.startswith('core,2')]
        self.fake.reply('--list-caches', (0, base.list_csv(
            *[r.replace('core,1,', 'core,', 1).replace('core,2,', 'core,', 1)
              for r in rows]), ''))

    def conf_cores(self) -> dict:
        return opencas_conf.read(self.opencas_conf).cores

    def test_attach_write_back_records_lazy_core(self):
        self.host()
        self.fake.reply('--add-core', (
            0, 'Successfully added core 7 to cache instance 2\n', ''))
        cached = self.cache.attach(LINK, WB, 'vol')
        self.assertEqual(('/dev/cas2-7', WB), (cached.path, cached.mode))
        self.assertEqual({(2, 7): LINK}, self.conf_cores())
        with open(self.opencas_conf) as conf_file:
            self.assertIn('lazy_startup=true', conf_file.read())

    def test_attach_write_through_records_nothing(self):
        self.host()
        self.fake.reply('--add-core', (
            0, 'Successfully added core 1 to cache instance 1\n', ''))
        self.assertEqual('/dev/cas1-1',
                         self.cache.attach(LINK, WT, 'vol').path)
        self.assertEqual({}, self.conf_cores())

    def test_attach_twice_returns_same_device_without_adding(self):
        self.host('core,2,7,%s,Active,-,/dev/cas2-7' % LINK)
        self.assertEqual('/dev/cas2-7',
                         self.cache.attach(LINK, WB, 'vol').path)
        self.assertEqual([], self.fake.argv_of('--add-core'))
        self.assertEqual({(2, 7): LINK}, self.conf_cores())

    def test_inactive_core_is_reactivated_not_duplicated(self):
        self.host('core,2,7,%s,Inactive,-,-' % LINK)
        self.fake.reply('--try-add', (0, '', ''))
        cached = self.cache.attach(LINK, WT, 'vol')
        self.assertEqual(('/dev/cas2-7', WB), (cached.path, cached.mode))
        self.assertEqual([['--script', '--add-core', '--try-add',
                           '--cache-id', '2', '--core-id', '7',
                           '--core-device', LINK]],
                         self.fake.argv_of('--try-add'))

    def _loader_wins(self) -> None:
        """The udev loader re-adds core 2/7 between our -L and try-add."""
        self.host('core,2,7,%s,Inactive,-,-' % LINK)

        def try_add(argv):
            self.host('core,2,7,%s,Active,-,/dev/cas2-7' % LINK)
            return (1, '', 'Error while adding core device to cache '
                           'instance 2\nDevice already added as a core\n')
        self.fake.reply('--try-add', try_add)

    def test_reactivation_goes_on_with_the_loaders_core(self):
        self._loader_wins()
        cached = self.cache.attach(LINK, WB, 'vol')
        self.assertEqual('/dev/cas2-7', cached.path)
        self.assertEqual(1, len(self.fake.argv_of('--try-add')))

    def test_loaders_core_still_needs_the_identity_check(self):
        self._loader_wins()
        verify = self.useFixture(fixtures.MockPatch(
            'os_brick_cas.identity.verify_link')).mock
        mismatch = exception.ImageIdentityMismatch(
            action='x', path=LINK, expected='volumes/volume-1',
            reason='/dev/rbd3 is RBD image volumes/other')
        # ours before the try-add passes; the one after the loader fails
        verify.side_effect = [None, mismatch]
        self.assertRaises(exception.ImageIdentityMismatch, self.cache.attach,
                          LINK, WB, 'vol')
        self.assertEqual(2, verify.call_count)
        self.assertIn('Open CAS udev loader', verify.call_args[0][1])

    def test_another_core_active_under_the_link_is_not_taken(self):
        self.host('core,2,7,%s,Inactive,-,-' % LINK)

        def try_add(argv):
            self.host('core,2,8,%s,Active,-,/dev/cas2-8' % LINK)
            return (1, '', 'Device already added as a core\n')
        self.fake.reply('--try-add', try_add)
        self.assertRaises(exception.CoreAlreadyCached, self.cache.attach,
                          LINK, WB, 'vol')

    def test_write_back_needs_persistent_instance(self):
        with open(self.opencas_conf, 'w') as conf_file:
            conf_file.write('[caches]\n1\t/dev/disk/by-id/nvme-p1\tWT\n')
        self.host()
        exc = self.assertRaises(exception.CacheNotRunning, self.cache.attach,
                                LINK, WB, 'vol')
        self.assertIn('[caches]', str(exc))
        self.assertEqual([], self.fake.argv_of('--add-core'))

    def test_record_failure_removes_new_core(self):
        self.host()
        self.fake.reply('--add-core', (
            0, 'Successfully added core 7 to cache instance 2\n', ''))
        self.fake.reply('--remove-core', (0, '', ''))
        # the file system refuses the write (e.g. /etc mounted read-only)
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.opencas.opencas_conf.os.replace',
            side_effect=OSError(errno.EROFS, 'Read-only file system')))
        self.assertRaises(OSError, self.cache.attach, LINK, WB, 'vol')
        self.assertEqual([['--remove-core', '--cache-id', '2', '--core-id',
                           '7']], self.fake.argv_of('--remove-core'))
        self.assertEqual({}, self.conf_cores())

    def test_detach_write_back_flushes_then_removes_and_forgets(self):
        self.host('core,2,7,%s,Active,-,/dev/cas2-7' % LINK)
        opencas_conf.update_file(self.opencas_conf,
                                 add=opencas_conf.CoreRow(2, 7, LINK))
        self.fake.reply('--flush-cache', (0, '', ''))
        self.fake.reply('--remove-core', (0, '', ''))
        self.assertTrue(self.cache.detach(LINK, 'vol'))
        verbs = [argv[0] for argv in self.fake.calls]
        # the last call: no drain class left for the next core 7
        self.assertEqual(['--list-caches', '--flush-cache', '--remove-core',
                          '--io-class'], verbs)
        self.assertEqual({}, self.conf_cores())

    def test_detach_write_through_does_not_flush(self):
        self.host('core,1,3,%s,Active,-,/dev/cas1-3' % LINK)
        self.fake.reply('--stats', stats(0))
        self.fake.reply('--remove-core', (0, '', ''))
        self.assertTrue(self.cache.detach(LINK, 'vol'))
        self.assertEqual([], self.fake.argv_of('--flush-cache'))

    def test_detach_flushes_dirty_core_of_write_through_instance(self):
        # '-Q -c wt -f no' leaves dirty blocks in an instance now 'wt'
        self.host('core,1,3,%s,Active,-,/dev/cas1-3' % LINK)
        opencas_conf.update_file(self.opencas_conf,
                                 add=opencas_conf.CoreRow(1, 3, LINK))
        self.fake.reply('--stats', stats(12))
        self.fake.reply('--flush-cache', (0, '', ''))
        self.fake.reply('--remove-core', (0, '', ''))
        self.assertTrue(self.cache.detach(LINK, 'vol'))
        self.assertEqual(1, len(self.fake.argv_of('--flush-cache')))
        self.assertEqual({}, self.conf_cores())

    def test_failed_flush_removes_nothing(self):
        self.host('core,2,7,%s,Active,-,/dev/cas2-7' % LINK)
        opencas_conf.update_file(self.opencas_conf,
                                 add=opencas_conf.CoreRow(2, 7, LINK))
        self.fake.reply('--flush-cache', (1, '', 'Error while flushing '
                                                 'cache\nTry again\n'))
        self.assertRaises(exception.FlushFailed, self.cache.detach, LINK,
                          'vol')
        self.assertEqual([], self.fake.argv_of('--remove-core'))
        self.assertEqual({(2, 7): LINK}, self.conf_cores())

    def test_inactive_dirty_core_without_device_is_kept(self):
        self.host('core,2,7,%s,Inactive,-,-' % LINK)
        self.fake.reply('--stats', stats(12))
        exc = self.assertRaises(exception.DirtyDataPresent,
                                self.cache.detach, LINK, 'vol')
        self.assertIn('12 dirty', str(exc))
        self.assertEqual([], self.fake.argv_of('--remove-inactive'))

    def test_inactive_clean_core_is_removed_without_force(self):
        self.host('core,2,7,%s,Inactive,-,-' % LINK)
        self.fake.reply('--stats', stats(0))
        self.fake.reply('--remove-inactive', (0, '', ''))
        self.assertTrue(self.cache.detach(LINK, 'vol'))
        self.assertEqual([['--remove-inactive', '--cache-id', '2',
                           '--core-id', '7']],
                         self.fake.argv_of('--remove-inactive'))

    def test_clean_core_the_loader_reactivated_is_removed_active(self):
        self.host('core,2,7,%s,Inactive,-,-' % LINK)
        self.fake.reply('--stats', stats(0))

        def remove_inactive(argv):
            self.host('core,2,7,%s,Active,-,/dev/cas2-7' % LINK)
            return (1, '', "Core is active. To manage the active core use "
                           "'--remove-core' command.\n")
        self.fake.reply('--remove-inactive', remove_inactive)
        self.fake.reply('--flush-cache', (0, '', ''))
        self.fake.reply('--remove-core', (0, '', ''))
        self.assertTrue(self.cache.detach(LINK, 'vol'))
        self.assertEqual(1, len(self.fake.argv_of('--remove-core')))

    def test_detach_of_gone_volume_succeeds_and_drops_stale_row(self):
        self.host()
        opencas_conf.update_file(self.opencas_conf,
                                 add=opencas_conf.CoreRow(2, 7, LINK))
        self.assertFalse(self.cache.detach(LINK, 'vol'))
        self.assertEqual({}, self.conf_cores())

    def test_row_of_instance_not_running_is_kept(self):
        self.fake.reply('--list-caches', (0, 'No caches running\n', ''))
        opencas_conf.update_file(self.opencas_conf,
                                 add=opencas_conf.CoreRow(2, 7, LINK))
        self.assertFalse(self.cache.detach(LINK, 'vol'))
        self.assertEqual({(2, 7): LINK}, self.conf_cores())

    def test_no_call_ever_forces(self):
        self.test_detach_write_back_flushes_then_removes_and_forgets()
        for argv in self.fake.calls:
            self.assertNotIn('--force', argv)
            self.assertNotIn('-f', argv)
