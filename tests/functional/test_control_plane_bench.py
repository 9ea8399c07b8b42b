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

"""benchmarks/control_plane.py still runs, and its call counts hold.

Privileged calls are counted, not timed, so they are asserted; the timing
figures it prints are only checked to be there (never compared with a
bound: benchmarks are scripts, not timed assertions).
"""

import glob
import os
import subprocess
import sys
import tempfile

import testtools

from tests.functional import base

SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'benchmarks',
                      'control_plane.py')


#: how the bench's call lists of a cached attach and detach begin
ATTACH = 'cached: casadm list-caches, rbd map'
DETACH = 'cached: casadm list-caches, casadm'


class ControlPlaneBenchTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        reason = base.can_use_dev()
        if reason:
            self.skipTest(reason)

    @staticmethod
    def work_dirs() -> set[str]:
        return set(glob.glob(os.path.join(tempfile.gettempdir(),
                                          'os-brick-cas-bench-*')))

    def run_bench(self, *args: str) -> str:
        dirs_before = self.work_dirs()
        result = subprocess.run(
            [sys.executable, SCRIPT, '--rounds', '2', '--concurrent', '2',
             '--latency-ms', '0'] + list(args),
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, result.returncode, result.stderr[-2000:])
        self.assertEqual(dirs_before, self.work_dirs())   # cleans up
        return result.stdout

    def line(self, out: str, start: str) -> str:
        [found] = [line for line in out.splitlines()
                   if line.strip().startswith(start)]
        return found.strip()

    def test_wt_with_udev_rule_adds_three_casadm_calls(self):
        out = self.run_bench('--udev-rule', '--mode', 'wt')
        self.assertIn('SIMULATED host', out)
        self.assertIn('not hardware figures', out)
        self.assertEqual('privileged calls per attach: plain krbd 1, '
                         'cached 4 (+3)',
                         self.line(out, 'privileged calls per attach'))
        # casadm -L comes first: a listed core of a stopped cache refuses
        # the attach before anything is mapped; the IO-class table is read
        # after the add (a class an earlier core of that id left is
        # dropped, a share put in place)
        self.assertEqual('cached: casadm list-caches, rbd map, casadm '
                         'add-core, casadm io-class', self.line(out, ATTACH))
        # the dirty count (casadm -P), not the mode, decides the flush;
        # the removed core's class goes with it
        self.assertEqual('cached: casadm list-caches, casadm stats, '
                         'casadm remove-core, casadm io-class, rbd unmap',
                         self.line(out, DETACH))
        self.assertIn('+<=2 privileged calls per attach: NOT met (+3)', out)
        self.assertIn('2 concurrent attaches + detaches', out)

    def test_a_host_layout_adds_the_new_cores_seq_cutoff_call(self):
        # Open CAS has no seq-cutoff option at --add-core: a layout that
        # differs from its defaults costs one -X per new core
        out = self.run_bench('--udev-rule', '--mode', 'wt', '--host-layout')
        self.assertIn('host layout with the per-mode defaults', out)
        self.assertEqual('cached: casadm list-caches, rbd map, casadm '
                         'add-core, casadm set-param, casadm io-class',
                         self.line(out, ATTACH))
        self.assertIn('+<=2 privileged calls per attach: NOT met (+4)', out)

    def test_wb_records_the_core_and_flushes_on_detach(self):
        out = self.run_bench('--udev-rule', '--mode', 'wb')
        attach = self.line(out, ATTACH)
        self.assertIn('casadm add-core', attach)
        self.assertIn('privsep record_core', attach)
        detach = self.line(out, DETACH)
        self.assertIn('casadm flush-core', detach)
        self.assertIn('privsep forget_core', detach)
        # the flush comes before the removal, never after
        self.assertLess(detach.index('flush-core'),
                        detach.index('remove-core'))

    def test_without_udev_rule_the_connector_makes_the_link(self):
        out = self.run_bench('--mode', 'wt')
        self.assertIn('privsep link_by_id',
                      self.line(out, ATTACH))
        self.assertIn('privsep unlink_by_id',
                      self.line(out, DETACH))
