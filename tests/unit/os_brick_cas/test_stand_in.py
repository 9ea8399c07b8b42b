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

"""doctor tells the stand-in from real casadm by what ``casadm -V`` says.

Real output is a recorded ``casadm --version`` of Open CAS v26.03.2; the
stand-in's is its own ``version`` handler. Both go through the product's
parser (:meth:`Casadm.version`) below processutils.
"""

import os
import stat

import fixtures

from cas_standin import casadm as sim_casadm
from cas_standin import state as sim_state
from os_brick_cas import casadm
from os_brick_cas.cmd import checks
from os_brick_cas.cmd.checks import host as host_checks
from os_brick_cas.cmd import config
from os_brick_cas.opencas import stand_in
from tests.functional.simulator import real_samples
from tests.unit.os_brick_cas import base


def real_version(module_loaded: bool = True) -> tuple[int, str, str]:
    name = ('022-casadm-version-csv.txt' if module_loaded
            else '018-casadm-V-nomodule.txt')
    _argv, code, out, err = real_samples.real_sample(name)
    return code, out, err


def simulated_version(module_loaded: bool = True) -> tuple[int, str, str]:
    reply = sim_casadm.version({'module_loaded': module_loaded}, {})
    return reply.code, reply.out, reply.err


class DetectionTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())

    def versions(self, reply: tuple[int, str, str]) -> dict[str, str]:
        self.fake.reply('--version', reply)
        return casadm.Casadm().version()

    def test_real_casadm_is_not_the_stand_in(self):
        for loaded in (True, False):
            versions = self.versions(real_version(loaded))
            self.assertFalse(stand_in.is_simulator(versions), versions)
            self.assertEqual({'CAS Cache Kernel Module', 'CAS CLI Utility'},
                             set(versions))

    def test_the_stand_in_names_itself_and_keeps_the_real_rows(self):
        for loaded in (True, False):
            versions = self.versions(simulated_version(loaded))
            self.assertTrue(stand_in.is_simulator(versions), versions)
            self.assertEqual(sim_casadm.VERSION,
                             versions['CAS CLI Utility'])
            self.assertEqual(sim_casadm.VERSION if loaded else 'Not Loaded',
                             versions['CAS Cache Kernel Module'])


class KernelModulesCheckTestCase(base.TestCase):
    """doctor's kernel-modules check asks casadm, not the file on PATH."""

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())
        self.useFixture(fixtures.MockPatchObject(config, 'ROOT', '/'))
        # casadm on PATH looks like the simulator's wrapper (what doctor
        # read on main), whatever casadm answers below processutils
        wrapper = os.path.join(self.tmp, 'casadm')
        with open(wrapper, 'w') as script:
            script.write('#!/bin/sh\n%s=/nowhere exec false\n'
                         % sim_state.ENV)
        os.chmod(wrapper, stat.S_IRWXU)
        self.useFixture(fixtures.MockPatch('shutil.which',
                                           return_value=wrapper))

    def kernel_modules(self) -> list[checks.Finding]:
        host = checks.Host(casadm=casadm.Casadm(), conf=self.conf.conf,
                           host='compute-a', config_files=[])
        return list(host_checks.kernel_modules(host))

    def test_real_casadm_gets_its_modules_checked(self):
        # main: the wrapper-looking file on PATH made doctor skip the check
        self.fake.reply('--version', real_version())
        findings = self.kernel_modules()
        self.assertEqual(['cas_cache', 'rbd'], sorted(
            name for name in host_checks.KERNEL_MODULES
            if any(name in f.message for f in findings)))

    def test_the_stand_in_is_not_asked_for_kernel_modules(self):
        self.fake.reply('--version', simulated_version())
        error = self.assertRaises(checks.NotChecked, self.kernel_modules)
        self.assertIn('casadm -V says it is the os-brick-cas host simulator',
                      str(error))
