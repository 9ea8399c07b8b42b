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

"""drain.unsupported_reason() and the manager's refusals (casadm faked)."""

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from tests.unit.os_brick_cas import base

HEADER = 'IO class id,IO class name,Eviction priority,Allocation\n'


def version(module: str, cli: str = '26.03.2.1032.release'):
    return 0, ('Name,Version\nCAS Cache Kernel Module,%s\n'
               'CAS CLI Utility,%s\n' % (module, cli)), ''


def table(*core_ids: int) -> tuple[int, str, str]:
    rows = ['0,unclassified,255,1.00']
    rows += ['%d,core_id:eq:%d&done,0,0.00' % (class_id, core_id)
             for class_id, core_id in enumerate(core_ids, 1)]
    return 0, HEADER + '\n'.join(rows) + '\n', ''


def instance(core_ids, status: str = 'Running'
             ) -> casadm_output.CacheInstance:
    return casadm_output.CacheInstance(
        cache_id=2, device='/dev/nvme0n1p2', status=status, mode='wb',
        cores=tuple(casadm_output.Core(2, n, '/dev/disk/by-id/rbd-v-%d' % n,
                                       'Active', '/dev/cas2-%d' % n)
                    for n in core_ids))


class UnsupportedReasonTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())
        self.fake.reply('--version', version('26.03.2.1032.release'))
        self.fake.reply('--io-class --list', table())
        self.casadm = casadm_mod.Casadm()

    def reason(self, cache=None):
        return drain.unsupported_reason(self.casadm,
                                        cache or instance([1, 2]))

    def test_current_release_running_with_room(self):
        self.assertIsNone(self.reason())

    def test_kernel_module_decides_not_the_cli(self):
        self.fake.reply('--version', version('22.6.3.0724.release',
                                             '26.03.2.1032.release'))
        self.assertIn('Open CAS 22.6.3.0724.release is older than v24.9',
                      self.reason())
        self.fake.reply('--version', version('24.9.0.0900.release',
                                             '22.6.3.0724.release'))
        self.assertIsNone(self.reason())

    def test_cli_version_when_the_module_shows_none(self):
        self.fake.reply('--version', version('', '22.6.3.0724.release'))
        self.assertIn('older than v24.9', self.reason())

    def test_unparsable_release_cannot(self):
        self.fake.reply('--version', version('master', 'master'))
        self.assertEqual("cannot tell the Open CAS release (casadm -V shows "
                         "'master'); draining needs v24.9 or newer, so it "
                         "is not attempted.", self.reason())

    def test_casadm_failing_cannot(self):
        self.fake.reply('--version', (1, '', 'boom\n'))
        self.assertIn('cannot ask casadm for the Open CAS release',
                      self.reason())

    def test_instance_not_running_cannot(self):
        reason = self.reason(instance([1], status='Incomplete'))
        self.assertIn('cache instance 2 is Incomplete', reason)
        self.assertIn('Attach (or detach) its inactive volumes', reason)

    def test_budget_spent_cannot_unless_every_core_is_drained(self):
        self.fake.reply('--io-class --list', table(*range(1, 33)))
        self.assertIn('already drains 32 cores',
                      self.reason(instance(range(1, 34))))
        # every core already drained: draining one again changes nothing
        self.assertIsNone(self.reason(instance(range(1, 33))))
        # classes of cores that are gone do not count
        self.assertIsNone(self.reason(instance(list(range(2, 33)) + [40])))


class ManagerTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())
        self.fake.reply('--io-class --list', table(3))
        self.manager = drain.DrainManager(casadm_mod.Casadm())

    def test_drain_refuses_an_old_release_before_any_change(self):
        self.fake.reply('--version', version('22.6.3.0724.release'))
        cache = instance([1])
        exc = self.assertRaises(exception.DrainUnsupported,
                                self.manager.drain, cache, cache.cores[0], 5)
        self.assertIn('upgrade Open CAS to v24.9', str(exc))
        self.assertEqual([['--version', '--output-format', 'csv']],
                         self.fake.calls)

    def test_new_core_drops_an_inherited_class_only(self):
        self.fake.reply('--io-class --load-config', (0, '', ''))
        # the rest of the table is composed for the cores listed now
        self.fake.reply('--list-caches', (0, base.list_csv(
            'cache,2,/dev/nvme0n1p2,Running,wb,-',
            'core,3,/dev/disk/by-id/rbd-v-3,Active,-,/dev/cas2-3',
            'core,7,/dev/disk/by-id/rbd-v-7,Active,-,/dev/cas2-7'), ''))
        self.manager.forget_inherited(2, 7)
        self.assertEqual([], self.fake.argv_of('--load-config'))
        self.manager.forget_inherited(2, 3)
        [load] = self.fake.argv_of('--load-config')
        self.assertIn('--cache-id', load)
