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

"""The host contract (tests/host_contract.py) on the real kernel.

The "reboot" of the crash scenario happens in the running guest (a real
guest reboot would lose the brd cache device): after ``casadm -T -n`` and
the unmap, Open CAS's own boot-time tool, ``casctl start``, reads the
opencas.conf the product wrote and loads the instance (``casadm -S -d
<dev> -l``).
"""

import subprocess

from tests import host_contract
from tests.kernel import base

OPENCAS_PY = '/lib/opencas'


class KernelHost(base.KernelTestCase):
    """The guest as the contract's host: boot loading through casctl."""

    pool = base.POOL

    def _opencas_conf_as_open_cas_reads_it(self) -> str:
        """Open CAS's own parser (utils/opencas.py) as its boot reads it.

        allow_incomplete: at boot (here: after the unmap) the core's by-id
        link is not there yet.
        """
        done = subprocess.run(
            ['python3', '-c', 'import sys, opencas\n'
             'c = opencas.cas_config.from_file(sys.argv[1],\n'
             '                                 allow_incomplete=True)\n'
             'for core in c.cores:\n'
             '    print(core.cache_id, core.core_id, core.device,\n'
             '          core.is_lazy())\n', base.OPENCAS_CONF],
            capture_output=True, text=True, cwd=OPENCAS_PY)
        self.assertEqual(0, done.returncode, done.stderr)
        return done.stdout

    def load_after_crash(self, cache_id: int, device: str) -> None:
        [core] = [row.split('\t') for row in
                  self.opencas_core_rows().splitlines()]
        self.assertEqual('%s %s %s True\n' % tuple(core[:3]),
                         self._opencas_conf_as_open_cas_reads_it())
        base.run('udevadm', 'settle', '-t', '30')
        refused = self.cas('-S', '-i', str(cache_id), '-d', device, '-l',
                           golden='start-cache-load-with-id')
        self.assertEqual(1, refused.returncode)
        started = base.run('casctl', 'start')
        self.assertEqual(0, started.returncode, started.stderr)

    def assert_unmap_never_forced(self) -> None:
        """A forced unmap would have dropped the mapping the test checks."""


class EveryModeTestCase(host_contract.EveryModeContract, KernelHost):
    pass


class BusyUnmapTestCase(host_contract.BusyUnmapContract, KernelHost):
    pass


class CrashReloadTestCase(host_contract.CrashReloadContract, KernelHost):
    pass


class DrainTestCase(host_contract.DrainContract, KernelHost):
    pass
