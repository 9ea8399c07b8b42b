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

"""Who holds a device open, read from the real /proc: a process started
here holds a file (the real kernel test holds /dev/casX-Y with QEMU)."""

import os
import subprocess
import sys

import fixtures
import testtools

from os_brick_cas.cmd import status
from os_brick_cas import openers
from os_brick_cas import report

INSTANCE = '6a0a7c4e-4d0b-4f3c-9a55-0f1e2d3c4b5a'
#: sleeps with stdin open; its argv carries ``-uuid`` as QEMU's does
HOLDER = 'import sys, time; time.sleep(60)'


class OpenersTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.device = os.path.join(tmp, 'cas1-1')
        self.other = os.path.join(tmp, 'cas1-2')
        for path in (self.device, self.other):
            open(path, 'w').close()

    def _hold(self, path: str, *argv: str) -> subprocess.Popen:
        with open(path, 'rb') as held:
            process = subprocess.Popen(
                [sys.executable, '-c', HOLDER] + list(argv), stdin=held)
        self.addCleanup(process.wait)
        self.addCleanup(process.kill)
        return process

    def test_names_the_process_and_its_instance(self):
        process = self._hold(self.device, '-uuid', INSTANCE)

        found = openers.openers([self.device, self.other])

        self.assertEqual([self.device], list(found))
        [opener] = found[self.device]
        self.assertEqual((process.pid, INSTANCE),
                         (opener.pid, opener.instance))
        self.assertEqual('%s (pid %d) of instance %s' % (
            opener.command, process.pid, INSTANCE), str(opener))

    def test_nobody_once_the_holder_is_gone(self):
        process = self._hold(self.device)
        self.assertIn(self.device, openers.openers([self.device]))
        process.kill()
        process.wait()

        self.assertEqual({}, openers.openers([self.device]))

    def test_status_says_who_holds_a_core(self):
        core = report.CoreReport(
            cache_id=1, core_id=1, core_device='/dev/disk/by-id/rbd-x',
            exported='/dev/cas1-1', status='Active', volume_id=None,
            rbd_image=None, rbd_device=None, dirty_blocks=512,
            occupancy_blocks=512, read_hit_ratio=None,
            write_hit_ratio=None,
            held_by=['qemu-system-x86 (pid 42) of instance %s' % INSTANCE])
        cache = report.CacheReport(
            cache_id=1, mode='wb', status='Running', device='/dev/ram0',
            configured_mode='wb', occupancy_blocks=512,
            occupancy_percent=1.0, dirty_blocks=512, read_hit_ratio=None,
            cores=[core])

        shown = status.render_table([cache])

        self.assertIn('held open by qemu-system-x86 (pid 42) of instance %s'
                      % INSTANCE, shown)
