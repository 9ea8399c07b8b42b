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

"""A hung stand-in call reacts to SIGINT as casadm does (only a flush)."""

import signal
import subprocess
import sys
import time

import testtools

_PLAY = ('from os_brick_cas.simulator import faults; import sys; '
         'print("ready", flush=True); '
         'sys.exit(faults.play({"verb": sys.argv[1], "hang": 20, '
         '"stdout": "", "stderr": "", "exit_code": 0}))')


class HangSignalTest(testtools.TestCase):

    def _hang(self, verb: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, '-c', _PLAY, verb],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        proc.stdout.readline()
        time.sleep(0.3)  # the handler is installed just before the sleep
        proc.send_signal(signal.SIGINT)
        return proc

    def test_non_flush_hang_ignores_sigint(self):
        proc = self._hang('add-core')
        self.assertRaises(subprocess.TimeoutExpired, proc.wait, timeout=1.5)

    def test_flush_hang_stops_on_sigint(self):
        proc = self._hang('flush-core')
        self.assertNotEqual(0, proc.wait(timeout=5))
