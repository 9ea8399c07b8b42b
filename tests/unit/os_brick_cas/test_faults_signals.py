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

_PLAY = ('from cas_standin import faults; import sys; '
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
        self._wait_for_handlers(proc.pid)
        proc.send_signal(signal.SIGINT)
        return proc

    @staticmethod
    def _wait_for_handlers(pid: int) -> None:
        """Until the hang's SIGTERM handler is in (SIGINT's is set first).

        A fixed pause lost that race on a loaded machine: the default
        SIGINT handler ended the process before the hang had set its own.
        """
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open('/proc/%d/status' % pid) as status:
                fields = dict(line.split(':', 1) for line in status)
            if int(fields['SigCgt'], 16) & (1 << (signal.SIGTERM - 1)):
                return
            time.sleep(0.01)
        raise AssertionError('the hang never set its signal handlers')

    def test_non_flush_hang_ignores_sigint(self):
        proc = self._hang('add-core')
        self.assertRaises(subprocess.TimeoutExpired, proc.wait, timeout=1.5)

    def test_flush_hang_stops_on_sigint(self):
        proc = self._hang('flush-core')
        self.assertNotEqual(0, proc.wait(timeout=30))
