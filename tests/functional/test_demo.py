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

"""The main job, as README runs it, on this machine (no Open CAS)."""

import os
import subprocess
import sys

from tests.functional import base


def cas_and_rbd_entries() -> set[str]:
    return {name for name in os.listdir('/dev')
            if name.startswith(('cas', 'rbd'))}


class DemoTestCase(base.FunctionalTestCase):

    def test_demo_runs_against_simulated_host_and_says_so(self):
        # compared with what was there before: the demo must remove what
        # it made, and must not touch what it did not make
        before = cas_and_rbd_entries()
        command = os.path.join(os.path.dirname(sys.executable),
                               'os-brick-cas')
        result = subprocess.run([command, 'demo', '--simulate'],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        self.assertIn('SIMULATED HOST', result.stdout)
        for mode in ('wt', 'wb', 'wa', 'wo', 'pt'):
            self.assertIn('volumes/volume-demo-%s' % mode, result.stdout)
        self.assertIn('detached volumes/volume-demo-wb (flushed to Ceph '
                      'first)', result.stdout)
        self.assertIn('demo passed (5 volumes, SIMULATED host)',
                      result.stdout)
        self.assertEqual(before, cas_and_rbd_entries())
