# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""Where the guest's time goes: every process the tests start, timed.

With OS_BRICK_CAS_KERNEL_PROFILE=1 (forwarded by tools/run-kernel-tests.sh)
each process started through :mod:`subprocess` (the tests' tools and the
product's casadm/rbd calls alike) adds a line to <results>/processes.tsv:
start (epoch seconds), seconds it ran, exit status, argv. A diagnostic of
the tier's own cost, not a test; the subunit stream has each test's span.
"""

import csv
import os
import subprocess
import threading
import time

_lock = threading.Lock()


def install(path: str) -> None:
    """Time every later :class:`subprocess.Popen` into *path* (TSV)."""
    original_init = subprocess.Popen.__init__
    original_wait = subprocess.Popen.wait

    def timed_init(self, args, *rest, **kwargs):
        self._profile_start = time.time()
        self._profile_logged = False
        original_init(self, args, *rest, **kwargs)

    def timed_wait(self, timeout=None):
        status = original_wait(self, timeout)
        if not getattr(self, '_profile_logged', True):
            self._profile_logged = True
            argv = ([self.args] if isinstance(self.args, (str, bytes))
                    else list(self.args))
            with _lock, open(path, 'a', newline='') as out:
                csv.writer(out, delimiter='\t').writerow(
                    ['%.3f' % self._profile_start,
                     '%.3f' % (time.time() - self._profile_start), status,
                     ' '.join(os.fsdecode(a) for a in argv)[:300]])
        return status

    subprocess.Popen.__init__ = timed_init
    subprocess.Popen.wait = timed_wait
