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

"""instance_uuid labels from a fake /proc (the process-table boundary):
only a QEMU of the QEMU user in the host's mount namespace names the
instance using a cached device."""

import getpass
import os

import fixtures
import testtools

from os_brick_cas.metrics import qemu

HOST_NS = 'mnt:[4026531840]'
OTHER_NS = 'mnt:[4026532999]'
INSTANCE = '6a0a7c4e-4d0b-4f3c-9a55-0f1e2d3c4b5a'
ATTACKER = 'deadbeef-0000-4000-8000-000000000bad'


class FakeProcTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.proc = os.path.join(self.tmp, 'proc')
        self.device = os.path.join(self.tmp, 'cas1-1')   # /dev/cas1-1
        open(self.device, 'w').close()
        self.user = getpass.getuser()
        self.uid = os.getuid()
        for pid in ('1', 'self'):
            self.process(pid, uid=0, ns=HOST_NS, argv=['init'], fds=[])

    def process(self, pid: str, uid: int, ns: str, argv: list[str],
                fds: list[str]) -> None:
        """/proc/<pid> as the kernel shows it: status, cmdline, ns, fd."""
        base = os.path.join(self.proc, pid)
        os.makedirs(os.path.join(base, 'ns'))
        os.makedirs(os.path.join(base, 'fd'))
        with open(os.path.join(base, 'status'), 'w') as status:
            status.write('Name:\tx\nUid:\t%d\t%d\t%d\t%d\n' % ((uid,) * 4))
        with open(os.path.join(base, 'cmdline'), 'w') as cmdline:
            cmdline.write('\0'.join(argv) + '\0')
        os.symlink(ns, os.path.join(base, 'ns', 'mnt'))
        for number, path in enumerate(fds, 3):
            os.symlink(path, os.path.join(base, 'fd', str(number)))

    def qemu(self, pid: str, uuid: str, uid: int = -1,
             ns: str = HOST_NS) -> None:
        self.process(pid, uid=self.uid if uid == -1 else uid, ns=ns,
                     argv=['qemu-system-x86_64', '-name', 'guest', '-uuid',
                           uuid], fds=['/dev/null', self.device])

    def found(self, user: str = '') -> dict[str, str]:
        return qemu.instances_by_device([self.device], self.proc,
                                        user or self.user)

    def test_the_qemu_user_in_the_host_namespace_names_the_instance(self):
        self.qemu('4242', INSTANCE)
        self.assertEqual({self.device: INSTANCE}, self.found())

    def test_another_user_in_its_own_namespace_names_nothing(self):
        # e.g. unshare -rm; mount --bind myfile /dev/cas1-1; qemu -uuid ...
        self.qemu('5000', ATTACKER, uid=self.uid + 1000, ns=OTHER_NS)
        self.assertEqual({}, self.found())
        self.qemu('4242', INSTANCE)
        self.assertEqual({self.device: INSTANCE}, self.found())

    def test_another_user_in_the_host_namespace_names_nothing(self):
        self.qemu('5000', ATTACKER, uid=self.uid + 1000)
        self.assertEqual({}, self.found())

    def test_the_qemu_user_in_another_namespace_names_nothing(self):
        self.qemu('5000', ATTACKER, ns=OTHER_NS)
        self.assertEqual({}, self.found())

    def test_a_setuid_process_of_mixed_uids_names_nothing(self):
        self.qemu('5000', ATTACKER)
        with open(os.path.join(self.proc, '5000', 'status'), 'w') as status:
            status.write('Uid:\t%d\t%d\t%d\t%d\n' % (
                self.uid + 1000, self.uid, self.uid, self.uid))
        self.assertEqual({}, self.found())

    def test_an_unknown_qemu_user_names_nothing(self):
        self.qemu('4242', INSTANCE)
        self.assertEqual({}, self.found(user='no-such-user-os-brick-cas'))

    def test_a_process_that_exits_while_we_look_is_skipped(self):
        self.qemu('4242', INSTANCE)
        self.process('4243', uid=self.uid, ns=HOST_NS, argv=['x'], fds=[])
        os.remove(os.path.join(self.proc, '4243', 'status'))
        self.assertEqual({self.device: INSTANCE}, self.found())
