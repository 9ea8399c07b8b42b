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

"""The stand-in tools print what the real ones print."""

import os
import signal
import subprocess
import time

from cas_standin import casadm as sim_casadm
from cas_standin import fixture
from os_brick_cas.opencas import stand_in
from tests.functional import base as functional_base
from tests.functional.simulator import real_samples
from tests.unit.os_brick_cas import base as unit_base


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True,
                          env=os.environ.copy())


class StandInTestCase(functional_base.FunctionalTestCase):
    caches = {1: 'wb', 2: 'wt'}

    def mapped_link(self, image: str) -> str:
        self.host.set_udev_by_id(True)
        self.host.create_image('volumes', image, 4)
        run('rbd', 'map', image, '--pool', 'volumes')
        return self.link(image)

    def test_list_matches_casadm_formatter(self):
        first = self.mapped_link('a')
        second = self.mapped_link('b')
        third = self.mapped_link('c')
        for cache_id, link in ((1, first), (1, second), (2, third)):
            self.assertEqual(0, run('casadm', '-A', '-i', str(cache_id), '-d',
                                    link).returncode)
        self.host.reboot()
        link = self.mapped_link('a')
        run('casadm', '--script', '--add-core', '--try-add', '--cache-id',
            '1', '--core-id', '1', '--core-device', link)
        out = run('casadm', '-L', '-o', 'csv').stdout
        sample = unit_base.sample('list_L_csv.txt').splitlines()
        produced = out.splitlines()
        self.assertEqual(sample[0], produced[0])
        self.assertEqual(['cache,1,/dev/nvme0n1p1,Incomplete,wb,-',
                          'core,1,/dev/rbd0,Active,-,/dev/cas1-1',
                          'core,2,%s,Inactive,-,-' % second,
                          'cache,2,/dev/nvme0n1p2,Incomplete,wt,-',
                          'core,1,%s,Inactive,-,-' % third],
                         produced[1:])
        # same shapes as the formatter's rows
        self.assertEqual(sample[4].split(',')[3:], produced[2].split(',')[3:])
        self.assertEqual(sample[5].split(',')[3:], produced[3].split(',')[3:])

    def _stats_headers(self) -> tuple[list[str], list[str]]:
        cache = run('casadm', '-P', '-i', '1', '-o', 'csv').stdout
        core = run('casadm', '-P', '-i', '1', '-j', '1', '-o', 'csv').stdout
        return cache.splitlines()[0].split(','), core.splitlines()[0].split(
            ',')

    def test_stats_headers_per_release(self):
        # 83/78 columns on v26.03.2 (as recorded), 79/74 before, 98/92 on
        # master (statistics_model.c of each release)
        run('casadm', '-A', '-i', '1', '-d', self.mapped_link('s'))
        real = (real_samples.header(real_samples.CACHE_STATS),
                real_samples.header(real_samples.CORE_STATS))
        self.assertEqual((83, 78), tuple(len(h) for h in real))
        self.assertEqual(real, self._stats_headers())
        deferred = {'Read deferred [Requests]', 'Read deferred [%]',
                    'Write deferred [Requests]', 'Write deferred [%]'}
        for version in ('24.09.0.0000.release', '25.12.2.0000.release'):
            self.host.set_version(version)
            for want, got in zip(real, self._stats_headers()):
                self.assertEqual([t for t in want if t not in deferred],
                                 got, version)
        self.host.set_version('26.03.2.0000.master')
        cache, core = self._stats_headers()
        self.assertEqual((98, 92), (len(cache), len(core)))
        self.assertEqual(real[0], [t for t in cache if not t.startswith(
            ('Prefetch', 'Cleaner', 'User requests'))])

    def test_version_is_the_real_one_and_names_the_stand_in(self):
        # the real rows, then one row real casadm never prints
        self.assertEqual(real_samples.real_sample(
            '022-casadm-version-csv.txt')[2] + '%s,%s\n' % (
                stand_in.SIMULATOR_ROW, sim_casadm.VERSION),
            run('casadm', '-V', '-o', 'csv').stdout)

    def test_messages_per_release(self):
        """"Old metadata" (v24.9 in the extended message), alru rows."""
        run('casadm', '-S', '-i', '3', '-d', '/dev/ram7', '-c', 'wb')
        run('casadm', '-T', '-i', '3', '-n')
        for version, want in (
                ('24.09.0.0000.release',
                 'Error inserting cache 3\nOld metadata found on device.\n'
                 'Please load cache metadata using --load option or use '
                 '--force to\n discard on-disk metadata and start fresh '
                 'cache instance.\n\n'),
                (None, real_samples.real_sample(
                    '082-casadm-S-nolforce.txt')[3].replace(
                        'cache 1', 'cache 3'))):
            self.host.set_version(version)
            start = run('casadm', '-S', '-i', '3', '-d', '/dev/ram7', '-c',
                        'wb')
            self.assertEqual((1, want), (start.returncode, start.stderr))
        rows = {}
        for version in ('24.09.0.0000.release', '25.12.2.0000.release'):
            self.host.set_version(version)
            rows[version] = run('casadm', '-G', '-n', 'cleaning-alru', '-i',
                                '1', '-o', 'csv').stdout.splitlines()
        self.assertEqual(real_samples.real_sample(
            '043-casadm-G-cleaning-alru.txt')[2].splitlines(),
            rows['25.12.2.0000.release'])
        self.assertEqual(rows['25.12.2.0000.release'][:5],
                         rows['24.09.0.0000.release'])

    def test_refusals(self):
        self.host.create_image('volumes', 'r', 4)
        device = run('rbd', 'map', 'r', '--pool', 'volumes').stdout.strip()
        result = run('casadm', '-A', '-i', '1', '-d', device)
        self.assertEqual((1, 'Please use correct by-id path to the device '
                             '%s.\n' % device),
                         (result.returncode, result.stderr))
        # options handling (validate_dev: plain printf) runs first
        result = run('casadm', '-A', '-i', '1', '-d', '/dev/disk/by-id/none')
        self.assertEqual((1, 'Failed to query device status.\n'
                             + sim_casadm.TRY_HELP,
                          'Error during options handling\n'),
                         (result.returncode, result.stdout, result.stderr))
        plain = os.path.join(self.tmp, 'not-a-device')
        open(plain, 'w').close()
        result = run('casadm', '-A', '-i', '1', '-d', plain)
        self.assertEqual((1, 'Path does not describe a block device\n'
                             + sim_casadm.TRY_HELP,
                          'Error during options handling\n'),
                         (result.returncode, result.stdout, result.stderr))
        self.host.set_module_loaded(False)
        result = run('casadm', '-L', '-o', 'csv')
        self.assertEqual((1, 'Is the kernel module loaded?\nError getting '
                             'caches list\n',
                          'Device /dev/cas_ctrl not found\n'),
                         (result.returncode, result.stdout, result.stderr))
        result = run('casadm', '-V', '-o', 'csv')
        self.assertEqual((0, 'Name,Version\nCAS Cache Kernel Module,Not '
                             'Loaded\nCAS CLI Utility,%s\nos-brick-cas host '
                             'simulator,%s\n'
                             % (sim_casadm.VERSION, sim_casadm.VERSION), ''),
                         (result.returncode, result.stdout, result.stderr))

    def test_messages_streams_and_exit_codes(self):
        link = self.mapped_link('m')
        run('casadm', '-A', '-i', '1', '-d', link)
        adding = 'Error while adding core device to cache instance 2\n'
        result = run('casadm', '-A', '-i', '2', '-d', link)
        self.assertEqual((1, '', adding + "Core device '%s' is already "
                                          "cached.\n" % link),
                         (result.returncode, result.stdout, result.stderr))
        other = self.mapped_link('n')
        self.host.set_open(os.path.realpath(other))
        result = run('casadm', '-A', '-i', '2', '-d', other)
        self.assertEqual(adding + "Failed to open '%s' device exclusively. "
                                  "Please close all applications accessing "
                                  "it or unmount the device.\n" % other,
                         result.stderr)
        for argv, err in (
                (('-P', '-i', '9', '-o', 'csv'), 'Cache Id 9 not running\n'),
                (('-P', '-i', '1', '-j', '9', '-o', 'csv'),
                 'No such core device in cache.\n'),
                (('--remove-inactive', '-i', '1', '-j', '1'),
                 "Core is active. To manage the active core use "
                 "'--remove-core' command.\n")):
            result = run('casadm', *argv)
            self.assertEqual((1, '', err), (result.returncode, result.stdout,
                                            result.stderr), argv)
        # a flush error prints its cause only; interrupted: the warning
        self.host.set_dirty(1, 1, 40)
        self.host.set_flush_speed(100)
        flush = subprocess.Popen(['casadm', '-F', '-i', '1', '-j', '1'],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=os.environ.copy())
        time.sleep(1)
        flush.send_signal(signal.SIGINT)
        out, err = flush.communicate(timeout=30)
        self.assertEqual((2, '', sim_casadm.DIRTY_FLUSHING_WARNING),
                         (flush.returncode, out, err))
        self.assertIn('CAS continues to operate\nnormally', err)
        self.host.set_flush_speed(0)
        self.host.reboot()
        result = run('casadm', '-F', '-i', '1', '-j', '1')
        self.assertEqual((1, 'Core device is in inactive state\n'),
                         (result.returncode, result.stderr))

    def test_remove_flushes_but_force_drops_dirty_data(self):
        link = self.mapped_link('f')
        run('casadm', '-A', '-i', '1', '-d', link)
        self.host.set_dirty(1, 1, 10)
        self.assertEqual(0, run('casadm', '-R', '-i', '1', '-j', '1',
                                '-f').returncode)
        self.assertEqual(10, self.host.state()['dropped_dirty_blocks'])
        run('casadm', '-A', '-i', '1', '-d', link)
        self.host.set_dirty(1, 1, 10)
        self.assertEqual(0, run('casadm', '-R', '-i', '1', '-j',
                                '1').returncode)
        self.assertEqual(10, self.host.state()['dropped_dirty_blocks'])

    def test_nth_call_fault(self):
        self.host.inject_fault('version', nth=2, exit_code=1,
                               stderr='boom\n')
        self.assertEqual(0, run('casadm', '-V', '-o', 'csv').returncode)
        failed = run('casadm', '-V', '-o', 'csv')
        self.assertEqual((1, 'boom\n'), (failed.returncode, failed.stderr))
        self.assertEqual(0, run('casadm', '-V', '-o', 'csv').returncode)

    def test_cleanup_removes_every_dev_entry(self):
        host = fixture.SimulatedHost(caches={1: 'wt'}, udev_by_id=True)
        host.setUp()
        host.create_image('volumes', 'gone', 4)
        run('rbd', 'map', 'gone', '--pool', 'volumes')
        link = host.by_id_link('volumes', 'gone')
        run('casadm', '-A', '-i', '1', '-d', link)
        created = host.dev_entries()
        self.assertIn('/dev/cas1-1', created)
        self.assertIn(link, created)
        host.cleanUp()
        for path in created:
            self.assertFalse(os.path.lexists(path), path)
