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
import subprocess

from os_brick_cas.simulator import fixture
from tests.functional import base as functional_base
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

    def test_stats_and_version_headers_are_casadm_26_03(self):
        link = self.mapped_link('s')
        run('casadm', '-A', '-i', '1', '-d', link)
        for argv, sample in (
                (('-P', '-i', '1', '-o', 'csv'), 'stats_P_cache_csv_HEAD.txt'),
                (('-P', '-i', '1', '-j', '1', '-o', 'csv'),
                 'stats_P_core_csv_HEAD.txt'),
                (('-V', '-o', 'csv'), 'version_V_csv.txt')):
            out = run('casadm', *argv).stdout.splitlines()
            expected = unit_base.sample(sample).splitlines()
            self.assertEqual(expected[0], out[0])
            self.assertEqual(len(expected[1].split(',')),
                             len(out[1].split(',')))
        self.assertEqual(unit_base.sample('version_V_csv.txt'),
                         run('casadm', '-V', '-o', 'csv').stdout)

    def test_refusals(self):
        self.host.create_image('volumes', 'r', 4)
        device = run('rbd', 'map', 'r', '--pool', 'volumes').stdout.strip()
        result = run('casadm', '-A', '-i', '1', '-d', device)
        self.assertEqual((1, 'Please use correct by-id path to the device '
                             '%s.\n' % device),
                         (result.returncode, result.stderr))
        result = run('casadm', '-A', '-i', '1', '-d', '/dev/disk/by-id/none')
        self.assertEqual('Device /dev/disk/by-id/none not found.\n',
                         result.stderr)
        self.host.set_module_loaded(False)
        result = run('casadm', '-L', '-o', 'csv')
        self.assertEqual((1, 'Is the kernel module loaded?\n',
                          'Device /dev/cas_ctrl not found\n'),
                         (result.returncode, result.stdout, result.stderr))

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
