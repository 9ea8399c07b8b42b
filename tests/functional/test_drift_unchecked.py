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

"""Issue 32, point 7: no "matches" about what could not be compared.

Through the CLI and drift() only, so they ran against the code before.
"""

from os_brick_cas import lifecycle
from tests.functional import test_lifecycle

VOL_A = test_lifecycle.VOL_A
MATCHES = 'every core matches'


class UncheckedDriftTestCase(test_lifecycle.LifecycleRegressionBase):

    def drained(self):
        core = self.attach(VOL_A, dirty=5)
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, out + err)
        return core

    def drift_lines(self, out: str) -> list[str]:
        return [line for line in out.splitlines()
                if 'life cycle' in line or 'fence marker' in line]

    def test_doctor_without_credentials_says_markers_not_compared(self):
        self.drained()
        self.credentials(False)
        code, out, err = self.cli('doctor')
        self.assertNotIn(MATCHES, out)
        self.assertIn("SKIP life cycle: Cinder's fence markers not compared",
                      out)

    def test_doctor_with_cinder_down_says_so(self):
        self.drained()
        self.cinder.down = True
        code, out, err = self.cli('doctor')
        self.assertNotIn(MATCHES, out, self.drift_lines(out))
        self.assertIn("WARN %s: Cinder's fence marker could not be read"
                      % VOL_A, out)

    def test_doctor_says_matches_when_it_compared(self):
        self.drained()
        code, out, err = self.cli('doctor')
        self.assertIn("OK   life cycle: every core matches its journal "
                      "record and Cinder's fence marker", out)

    def test_drift_reports_a_table_it_could_not_read(self):
        core = self.drained()
        caches = self.casadm.list_caches()
        self.host.inject_fault('io-class', exit_code=1, stderr='busy\n',
                               count=10)
        found = lifecycle.drift(self.casadm, None, caches)
        unchecked = {d.volume: d.problem for d in found
                     if d.kind == lifecycle.UNCHECKED}
        self.assertIn('could not be read',
                      unchecked['cache instance %d' % core.cache_id])
