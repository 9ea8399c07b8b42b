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

"""The host the os_brick_cas Ansible role provisioned, in the guest.

tools/run-ansible-tests.sh boots the guest in provision mode: guest.sh
installs nothing of Open CAS itself, the role (deploy/ansible/roles/
os_brick_cas, tools/kernel/ansible-guest.yml) runs twice with
connection local and installs, loads and configures everything; then this
module runs, before test_attach. The host layout is the playbook's: wt
instance 1 on /dev/ram0, wb instance 2 on /dev/ram1. Skips unless the
guest was provisioned that way.
"""

import os
import re
import sys

import testtools

from tests.kernel import base

PROVISIONED = os.environ.get('OS_BRICK_CAS_KERNEL_PROVISIONED') == '1'
CONFIG = '/etc/os-brick-cas/os-brick-cas.conf'
CLI = os.path.join(os.path.dirname(sys.executable), 'os-brick-cas')


def recap(log: str) -> dict[str, int]:
    """The counts of ansible-playbook's PLAY RECAP line for localhost."""
    with open(os.path.join(base.RESULTS, log)) as log_file:
        found = re.search(r'^localhost\s*:\s*(.*)$', log_file.read(),
                          re.MULTILINE)
    return {key: int(value) for key, value in
            re.findall(r'(\w+)=(\d+)', found.group(1))}


class ProvisionedHostTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        if not (base.GUEST and PROVISIONED):
            self.skipTest('runs only in the guest the os_brick_cas '
                          'role provisioned (tools/run-ansible-tests.sh)')

    def cli(self, *args: str):
        return base.run(CLI, '--config-file', CONFIG, *args, timeout=300)

    def test_a_playbook_second_run_changes_nothing(self):
        if not os.path.exists(os.path.join(base.RESULTS, 'ansible-2.log')):
            # CI's kernel suite plays once (OS_BRICK_CAS_ROLE_RUNS=1): a
            # play is 20-30 min under TCG beside the other suites
            self.skipTest('one play in this run: tools/run-ansible-tests.sh '
                          'plays twice and checks the second changed nothing')
        first, second = recap('ansible-1.log'), recap('ansible-2.log')

        self.assertGreater(first['changed'], 0, first)
        self.assertEqual((0, 0, 0), (second['changed'], second['failed'],
                                     second['unreachable']), second)

    def test_b_doctor_passes(self):
        done = self.cli('doctor')

        self.assertEqual(0, done.returncode, done.stdout + done.stderr)
        for expected in ('kernel module cas_cache is loaded',
                         'kernel module rbd is loaded',
                         'udev rule /etc/udev/rules.d/60-os-brick-cas-rbd.'
                         'rules is installed',
                         'instance 1 (wt) matches the host layout',
                         'instance 2 (wb) matches the host layout'):
            self.assertIn(expected, done.stdout)
        # loaded by modprobe from the role's files, loads again at boot
        with open('/etc/modules-load.d/os-brick-cas.conf') as modules:
            self.assertEqual(['cas_cache', 'rbd'], sorted(
                line for line in modules.read().splitlines()
                if line and not line.startswith('#')))

    def test_c_host_apply_again_changes_nothing(self):
        # the role's two plays ran host apply twice (the second play's
        # recap, test_a, says it changed nothing); once more by hand
        before = base.run('casadm', '-L', '-o', 'csv').stdout
        done = self.cli('host', 'apply')
        self.assertEqual(0, done.returncode, done.stdout + done.stderr)
        self.assertIn('nothing to change', done.stdout)
        self.assertNotIn('changed', done.stdout)
        self.assertEqual(before, base.run('casadm', '-L', '-o', 'csv').stdout)
        self.assertIn('cache,2,/dev/ram1,Running,wb', before)

    def test_d_host_check_reports_a_hand_changed_cleaning_policy(self):
        self.assertEqual(0, self.cli('host', 'check').returncode)
        changed = base.run('casadm', '-X', '-n', 'cleaning', '-i', '2',
                           '-p', 'acp')
        self.assertEqual(0, changed.returncode, changed.stderr)

        done = self.cli('host', 'check')

        self.assertEqual(1, done.returncode, done.stdout + done.stderr)
        warnings = [line for line in done.stdout.splitlines()
                    if line.startswith('WARN')]
        self.assertIn('instance 2: cleaning policy is acp, the layout '
                      'wants alru', '\n'.join(warnings))
        # apply sets it back, and the host matches again
        self.assertEqual(0, self.cli('host', 'apply').returncode)
        self.assertEqual(0, self.cli('host', 'check').returncode)
        self.assertIn('Cleaning policy type,alru', base.run(
            'casadm', '-G', '-n', 'cleaning', '-i', '2', '-o',
            'csv').stdout.replace('"', ''))
