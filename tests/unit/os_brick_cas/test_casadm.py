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

import signal
import subprocess
from unittest import mock

import ddt
import fixtures

from os_brick_cas import casadm
from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from tests.unit.os_brick_cas import base


class ParseListTestCase(base.TestCase):

    def test_sample_from_casadm_formatter(self):
        caches = casadm_output.parse_list(base.sample('list_L_csv.txt'))
        self.assertEqual([1, 2], [c.cache_id for c in caches])
        first, second = caches
        self.assertEqual(('wb', 'Running', '/dev/nvme0n1p1'),
                         (first.mode, first.status, first.device))
        self.assertEqual(
            [(1, 1, '/dev/sdb', 'Active', '/dev/cas1-1'),
             (1, 2, '/dev/sdc', 'Inactive', None)],
            [(c.cache_id, c.core_id, c.device, c.status, c.exported)
             for c in first.cores])
        self.assertFalse(first.cores[1].active)
        # a core row belongs to the cache row above it; pool rows are skipped
        self.assertEqual([(2, 1, 'Flushing (42.0 %)')],
                         [(c.cache_id, c.core_id, c.status)
                          for c in second.cores])
        self.assertTrue(second.cores[0].active)

    def test_no_caches_running(self):
        self.assertEqual([], casadm_output.parse_list('No caches running\n'))

    def test_garbage_is_an_error(self):
        self.assertRaises(exception.CasadmCommandFailed,
                          casadm_output.parse_list, 'id,type\n1,2\n')

    def test_find_core_is_exact_not_substring(self):
        caches = casadm_output.parse_list(base.list_csv(
            'cache,1,/dev/nvme0n1p1,Running,wt,-',
            'core,1,/dev/disk/by-id/rbd-volumes-volume-10,Active,-,'
            '/dev/cas1-1'))
        self.assertIsNone(casadm.Casadm.find_core(
            caches, '/dev/disk/by-id/rbd-volumes-volume-1'))
        self.assertEqual(1, casadm.Casadm.find_core(
            caches, '/dev/disk/by-id/rbd-volumes-volume-10').core_id)


class ParseStatsTestCase(base.TestCase):

    def test_core_stats_by_name(self):
        stats = casadm_output.parse_stats(
            base.sample('stats_P_core_csv_HEAD.txt'))
        self.assertEqual('400', stats['Dirty [4KiB Blocks]'])
        self.assertEqual('/dev/cas1-1', stats['Exported Object'])
        self.assertEqual('Cache clean', stats['Dirty for'])

    def test_quoted_values_with_commas(self):
        text = 'Core Id,Core Device,Dirty [4KiB Blocks]\n1,"/dev/a,b",7\n'
        stats = casadm_output.parse_stats(text)
        self.assertEqual('/dev/a,b', stats['Core Device'])
        self.assertEqual('7', stats['Dirty [4KiB Blocks]'])

    def test_two_value_lines_is_an_error(self):
        self.assertRaises(exception.CasadmCommandFailed,
                          casadm_output.parse_stats, 'a,b\n1,2\n3,4\n')


@ddt.ddt
class CasadmCallsTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())
        self.casadm = casadm.Casadm()

    def test_list_argv(self):
        self.fake.reply('--list-caches', (0, 'No caches running\n', ''))
        self.assertEqual([], self.casadm.list_caches())
        self.assertEqual([['--list-caches', '--output-format', 'csv',
                           '--by-id-path']], self.fake.calls)

    def test_add_core_parses_core_id(self):
        self.fake.reply('--add-core', (
            0, 'Successfully added core 3 to cache instance 2\n', ''))
        core = self.casadm.add_core(2, '/dev/disk/by-id/rbd-volumes-v1')
        self.assertEqual((2, 3, '/dev/cas2-3'),
                         (core.cache_id, core.core_id, core.exported))
        self.assertEqual([['--add-core', '--cache-id', '2', '--core-device',
                           '/dev/disk/by-id/rbd-volumes-v1']],
                         self.fake.calls)

    def test_try_add_argv(self):
        self.fake.reply('--try-add', (
            0, 'Successfully added device in try add mode '
               '/dev/disk/by-id/rbd-volumes-v1\n', ''))
        core = self.casadm.try_add_core(2, 5, '/dev/disk/by-id/rbd-volumes-v1')
        self.assertEqual('/dev/cas2-5', core.exported)
        self.assertEqual([['--script', '--add-core', '--try-add',
                           '--cache-id', '2', '--core-id', '5',
                           '--core-device',
                           '/dev/disk/by-id/rbd-volumes-v1']],
                         self.fake.calls)

    @ddt.data(
        ('Device /dev/cas_ctrl not found\n', 'Is the kernel module loaded?\n',
         exception.CasModuleNotLoaded),
        ('Error while adding core device to cache instance 9\n'
         'Cache ID does not exist\n', '', exception.CacheNotFound),
        ("Core device '/dev/disk/by-id/rbd-volumes-v1' is already cached.\n",
         '', exception.CoreAlreadyCached),
        ('Error while adding core device to cache instance 1\n'
         'Device already added as a core\n', '', exception.CoreAlreadyCached),
        ("Failed to open '/dev/disk/by-id/rbd-volumes-v1' device "
         "exclusively. Please close all applications accessing it or "
         "unmount the device.\n", '', exception.DeviceBusy),
        ('Please use correct by-id path to the device /dev/rbd0.\n', '',
         exception.CasadmCommandFailed),
    )
    @ddt.unpack
    def test_add_core_errors(self, stderr, stdout, error):
        self.fake.reply('--add-core', (1, stdout, stderr))
        exc = self.assertRaises(error, self.casadm.add_core, 1,
                                '/dev/disk/by-id/rbd-volumes-v1')
        self.assertNotIn('%(', str(exc))

    @ddt.data(
        ('Cache Id 9 not running\n', exception.CacheNotFound),
        ('No such core device in cache.\n', exception.CoreNotFound),
        ("Core is active. To manage the active core use '--remove-core' "
         "command.\n", exception.CoreActive),
    )
    @ddt.unpack
    def test_casadm_own_refusals(self, stderr, error):
        self.fake.reply('--stats', (1, '', stderr))
        exc = self.assertRaises(error, self.casadm.stats, 9, 3)
        self.assertNotIn('%(', str(exc))

    @ddt.data(
        ('Cache is in incomplete state - at least one core is inactive\n',
         'Incomplete'),
        ('Unrecognized option --core-id\n', 'older than os-brick-cas'),
    )
    @ddt.unpack
    def test_flush_refusals_are_flush_failed(self, stderr, reason):
        self.fake.reply('--flush-cache', (1, "Try `casadm --help | -H' for "
                                             "more information.\n", stderr))
        exc = self.assertRaises(exception.FlushFailed, self.casadm.flush,
                                2, None, 5)
        self.assertIn(reason, str(exc))
        self.assertNotIn('%(', str(exc))

    def test_casadm_missing(self):
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.privileged.casadm.shutil.which', return_value=None))
        exc = self.assertRaises(exception.CasadmNotFound,
                                self.casadm.list_caches)
        self.assertIn('Install Open CAS', str(exc))

    def test_remove_core_never_forced(self):
        self.fake.reply('--remove-core', (0, '', ''))
        self.casadm.remove_core(casadm_output.Core(1, 4, '/dev/disk/by-id/x',
                                                   'Active', '/dev/cas1-4'))
        self.assertEqual([['--remove-core', '--cache-id', '1', '--core-id',
                           '4']], self.fake.calls)

    def test_remove_busy(self):
        self.useFixture(fixtures.MockPatch('tenacity.nap.time.sleep'))
        self.fake.reply('--remove-core', (
            1, '', 'Error while removing core device 4 from cache instance '
                   '1\nDevice opens or mount are pending to this cache\n'))
        exc = self.assertRaises(
            exception.DeviceBusy, self.casadm.remove_core,
            casadm_output.Core(1, 4, '/dev/disk/by-id/x', 'Active',
                               '/dev/cas1-4'))
        self.assertIn('/dev/cas1-4', str(exc))
        self.assertEqual(casadm.REMOVE_ATTEMPTS,
                         len(self.fake.argv_of('--remove-core')))

    def test_flush_interrupted_is_flush_failed(self):
        self.fake.reply('--flush-cache', (2, '', 'Flushing of core '
                                                 'interrupted\n'))
        exc = self.assertRaises(exception.FlushFailed, self.casadm.flush,
                                1, 2, 30)
        self.assertIn('left in place', str(exc))

    def test_flush_timeout_interrupts_casadm(self):
        self.fake.reply('--flush-cache', lambda argv: (0, '', ''))
        proc = self._hang()
        exc = self.assertRaises(exception.FlushTimedOut, self.casadm.flush,
                                1, 2, 5)
        self.assertIn('5 s', str(exc))
        proc.send_signal.assert_called_once_with(signal.SIGINT)

    def _hang(self) -> mock.Mock:
        proc = mock.Mock()

        def hang(binary, *args, **kwargs):
            kwargs['on_execute'](proc)
            raise subprocess.TimeoutExpired(binary, kwargs['timeout'])

        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.privileged.casadm.processutils.execute',
            side_effect=hang))
        return proc

    def test_hung_list_is_killed_not_interrupted(self):
        """casadm ignores SIGINT outside a flush: SIGKILL, at once."""
        proc = self._hang()
        exc = self.assertRaises(exception.CasadmTimedOut,
                                self.casadm.list_caches)
        self.assertIn('--list-caches', str(exc))
        proc.kill.assert_called_once_with()
        proc.send_signal.assert_not_called()

    def test_hung_removal_is_interrupted_then_killed(self):
        proc = self._hang()
        proc.communicate.side_effect = [
            subprocess.TimeoutExpired('casadm', 10), ('', '')]
        self.assertRaises(exception.CasadmTimedOut, self.casadm.remove_core,
                          casadm_output.Core(1, 4, '/dev/disk/by-id/x',
                                             'Active', '/dev/cas1-4'))
        proc.send_signal.assert_called_once_with(signal.SIGINT)
        proc.kill.assert_called_once_with()

    def test_unkillable_call_is_left_to_a_reaper(self):
        """A process stuck in the kernel never holds the privsep worker."""
        proc = self._hang()
        proc.communicate.side_effect = subprocess.TimeoutExpired('casadm', 10)
        thread = self.useFixture(fixtures.MockPatch(
            'os_brick_cas.privileged.casadm.threading.Thread')).mock
        self.assertRaises(exception.CasadmTimedOut, self.casadm.stats, 1, 1)
        proc.kill.assert_called_once_with()
        thread.assert_called_once_with(target=proc.communicate, daemon=True,
                                       name=mock.ANY)
        thread.return_value.start.assert_called_once_with()

    def test_stats_and_dirty(self):
        self.fake.reply('--stats', (0, base.sample(
            'stats_P_core_csv_HEAD.txt'), ''))
        core = casadm_output.Core(1, 1, '/dev/disk/by-id/x', 'Active',
                                  '/dev/cas1-1')
        self.assertEqual(400, self.casadm.dirty_blocks(core))
        self.assertEqual([['--stats', '--cache-id', '1', '--core-id', '1',
                           '--output-format', 'csv', '--by-id-path']],
                         self.fake.calls)

    def test_version(self):
        self.fake.reply('--version', (0, base.sample('version_V_csv.txt'), ''))
        self.assertEqual('26.03.2.1032.release',
                         self.casadm.version()['CAS CLI Utility'])

    @ddt.data(
        ('add_core', (0, '/dev/disk/by-id/x')),
        ('add_core', ('1', '/dev/disk/by-id/x')),
        ('add_core', (True, '/dev/disk/by-id/x')),
        ('add_core', (1, '/dev/rbd0')),
        ('add_core', (1, '/dev/disk/by-id/x; reboot')),
        ('add_core', (1, '/dev/disk/by-id/../../sda')),
        ('add_core', (1, '/etc/passwd')),
        ('try_add_core', (1, 4096, '/dev/disk/by-id/x')),
        ('try_add_core', (1, '2', '/dev/disk/by-id/x')),
        ('flush', (1, 1, 0)),
        ('flush', (1, 1, '30')),
        ('stats', (16385, None)),
    )
    @ddt.unpack
    def test_bad_input_runs_nothing(self, method, args):
        self.assertRaises(exception.InvalidInput,
                          getattr(self.casadm, method), *args)
        self.assertEqual([], self.fake.calls)


class BusyRetryTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())
        self.useFixture(fixtures.MockPatch('tenacity.nap.time.sleep'))

    def test_try_again_is_retried_then_succeeds(self):
        replies = [(1, '', 'Error while adding core device to cache instance '
                           '1\nTry again\n'),
                   (0, 'Successfully added core 2 to cache instance 1\n', '')]
        self.fake.reply('--add-core', lambda argv: replies.pop(0))
        core = casadm.Casadm().add_core(1, '/dev/disk/by-id/rbd-volumes-v')
        self.assertEqual(2, core.core_id)
        self.assertEqual(2, len(self.fake.argv_of('--add-core')))

    def test_remove_refused_by_a_passing_opener_is_retried(self):
        # udev's blkid probe holds /dev/casX-Y briefly after a writer closes
        # it (seen on the real-kernel tier: tests/kernel/test_busy.py)
        replies = [(1, '', 'Error while removing core device 4 from cache '
                           'instance 1\nDevice opens or mount are pending '
                           'to this cache\n'), (0, '', '')]
        self.fake.reply('--remove-core', lambda argv: replies.pop(0))
        casadm.Casadm().remove_core(casadm_output.Core(
            1, 4, '/dev/disk/by-id/x', 'Active', '/dev/cas1-4'))
        self.assertEqual(2, len(self.fake.argv_of('--remove-core')))

    def test_concurrent_flush_retried_then_reported(self):
        self.fake.reply('--flush-cache', (
            1, '', 'Error while flushing core 1\nAnother flush operation in '
                   'progress\n'))
        exc = self.assertRaises(exception.FlushFailed,
                                casadm.Casadm().flush, 1, 1, 30)
        self.assertIn('Another flush operation in progress', str(exc))
        self.assertEqual(4, len(self.fake.argv_of('--flush-cache')))
