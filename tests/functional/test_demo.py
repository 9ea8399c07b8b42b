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

from os_brick_cas import exception
from os_brick_cas.opencas import known_defects
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

    def run_demo(self, *argv: str) -> subprocess.CompletedProcess:
        command = os.path.join(os.path.dirname(sys.executable),
                               'os-brick-cas')
        return subprocess.run([command, 'demo', '--simulate'] + list(argv),
                              capture_output=True, text=True, timeout=300)

    def test_demo_says_what_each_mode_does_on_a_release_the_gate_passes(
            self):
        # main: the simulated host said v26.03.2 (casadm -V) while the
        # gate read nothing (no sys/module/cas_cache/version), so wb and
        # wo attached on a release that refuses them on a real host
        result = self.run_demo()
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        self.assertIn('Open CAS 25.12.2.0000.release loaded: no known '
                      'data-loss defect, every mode offered', result.stdout)
        for mode, words in (('wt', 'write-through: '),
                            ('wb', 'write-back: '), ('wa', 'write-around: '),
                            ('wo', 'write-only: '),
                            ('pt', 'pass-through: ')):
            self.assertIn('\n%s: %s' % (mode, words), result.stdout)
        self.assertEqual('', result.stderr)

    def test_demo_on_a_release_with_a_known_defect_is_refused_as_real(self):
        before = cas_and_rbd_entries()
        result = self.run_demo('--simulated-release', '26.03.2.0000.release')
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        self.assertIn('Open CAS 26.03.2.0000.release loaded: modes wb, wo '
                      'not offered (known data-loss defect)', result.stdout)
        for mode in ('wb', 'wo'):
            self.assertIn('volumes/volume-demo-%s not attached, as on a real '
                          'host with this release: Open CAS '
                          '26.03.2.0000.release has known defect '
                          'ocf-hit-invalid-backfill, which can lose '
                          'acknowledged %s writes' % (mode, mode),
                          result.stdout)
            self.assertNotIn('attached volumes/volume-demo-%s ' % mode,
                             result.stdout)
        self.assertIn('attached volumes/volume-demo-wt ', result.stdout)
        self.assertEqual(before, cas_and_rbd_entries())


class SimulatedHostGateTestCase(base.FunctionalTestCase):
    """The simulated host's release is what the known-defect gate reads."""

    caches = {1: 'wt', 2: 'wb'}

    def test_the_gate_reads_the_release_casadm_reports(self):
        self.conf.config(group='os_brick_cas', host_root=self.host.host_root)
        self.host.set_version('26.03.2.0000.release')
        self.assertEqual('26.03.2.0000.release',
                         known_defects.loaded_version())
        props = self.props(self.image('volume-gate'), 'wb')
        error = self.assertRaises(exception.CasError,
                                  self.connector.connect_volume, props)
        self.assertIn('known defect', str(error))
        self.host.set_version('25.12.2.0000.release')
        info = self.connector.connect_volume(props)
        self.assertTrue(info['path'].startswith('/dev/cas2-'))
        self.host.set_module_loaded(False)
        self.assertIsNone(known_defects.loaded_version())
        self.host.set_module_loaded(True)
        self.connector.disconnect_volume(props, info)
