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

"""Per-volume cache shares through attach, drain, detach and a reboot.

Issue 35, first slice, on the host simulator: the stand-in casadm stores
and lists IO-class tables as casadm does (it does not model the caps'
effect on occupancy; that is the real-kernel tier's job).
"""

import logging
import os

import fixtures

from os_brick_cas import exception
from os_brick_cas import io_class_table
from tests.functional import test_drain

HEADER = 'IO class id,IO class name,Eviction priority,Allocation\n'


class ShareBase(test_drain.DrainBase):

    caches = {1: 'wt', 2: 'wb'}

    def attach(self, name: str, mode: str = 'wb', share=None,
               dirty: int = 0):
        extra = {} if share is None else {'cache_share': share}
        props = self.props(self.image(name, size_mb=1), mode, **extra)
        info = self.connector.connect_volume(props)
        [core] = [c for c in self.cores() if name in c.device.replace(
            '%2D', '-')]
        if dirty:
            self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return props, info, core

    def table(self, cache_id: int = 2) -> str:
        return self.io_class_csv(cache_id)


class ShareLifeTestCase(ShareBase):

    def test_attach_loads_the_share_and_detach_removes_it(self):
        props_a, info_a, a = self.attach('volume-sh-a', share=25)
        props_b, info_b, b = self.attach('volume-sh-b', share=10)
        props_c, info_c, _c = self.attach('volume-sh-c')
        self.assertEqual((25, 10), (info_a['cache_share'],
                                    info_b['cache_share']))
        self.assertNotIn('cache_share', info_c)
        # class 0 gets what the shares leave; the shares are pinned
        self.assertEqual(HEADER + '0,unclassified,255,0.65\n'
                         '1,core_id:eq:%d&done,,0.25\n'
                         '2,core_id:eq:%d&done,,0.10\n'
                         % (a.core_id, b.core_id), self.table())
        self.assertEqual(io_class_table.ShareStatus(25, 25),
                         self.connector.cache_share(props_a))
        self.assertEqual(io_class_table.ShareStatus(None, None),
                         self.connector.cache_share(props_c))
        self.connector.disconnect_volume(props_a, info_a)
        self.assertEqual(HEADER + '0,unclassified,255,0.90\n'
                         '1,core_id:eq:%d&done,,0.10\n' % b.core_id,
                         self.table())
        self.connector.disconnect_volume(props_b, info_b)
        self.connector.disconnect_volume(props_c, info_c)
        self.assertEqual(HEADER + '0,unclassified,255,1.00\n', self.table())
        self.assert_clean_host()

    def test_the_class_is_in_the_table_before_the_core_is_added(self):
        # (issue 35 point 4) whatever the new core caches, udev's first
        # probe reads included, is in its class from the start: OCF moves
        # lines of other classes into a class without its cap check
        _props, _info, first = self.attach('volume-sh-first', share=10)
        start = len(self.host.calls('casadm'))
        _props, _info, core = self.attach('volume-sh-second', share=25)
        argvs = [call['argv'] for call in self.host.calls('casadm')[start:]]
        [add] = [index for index, argv in enumerate(argvs)
                 if '--add-core' in argv]
        loads = [index for index, argv in enumerate(argvs)
                 if '--load-config' in argv]
        self.assertTrue(loads and max(loads) < add, argvs)
        # and that table is not read or loaded again after the add
        self.assertEqual([], [argv for argv in argvs[add:]
                              if '--io-class' in argv])
        # the id the table names is the one the add used: the lowest free
        self.assertEqual(['--core-id', str(first.core_id + 1)],
                         argvs[add][-2:])
        self.assertEqual(first.core_id + 1, core.core_id)
        self.assertIn('core_id:eq:%d&done,,0.25' % core.core_id,
                      self.table())

    def test_a_failed_add_takes_its_class_out_again(self):
        props, info, kept = self.attach('volume-sh-kept', share=10)
        before = self.table()
        self.host.inject_fault('add-core', exit_code=1,
                               stderr='Error while adding core device to '
                                      'cache instance 2\n')
        props = self.props(self.image('volume-sh-failed', size_mb=1), 'wb',
                           cache_share=25)
        self.assertRaises(exception.CasError, self.connector.connect_volume,
                          props)
        # the class it was given before the add is gone; the other stays
        self.assertEqual(before, self.table())
        self.assertEqual([kept.core_id], [core.core_id
                                          for core in self.cores()])

    def test_write_through_instance_gets_shares_too(self):
        props, info, core = self.attach('volume-sh-wt', 'wt', share=40)
        self.assertEqual(HEADER + '0,unclassified,255,0.60\n'
                         '1,core_id:eq:%d&done,,0.40\n' % core.core_id,
                         self.table(1))
        self.connector.disconnect_volume(props, info)
        self.assertEqual(HEADER + '0,unclassified,255,1.00\n', self.table(1))
        self.assert_clean_host()

    def test_drain_wins_over_the_share_and_undrain_restores_it(self):
        props, info, core = self.attach('volume-sh-drain', share=30,
                                        dirty=20)
        self.manager.drain(self.cache_of(core), core, 10)
        self.assertEqual(0, self.dirty(core))
        # allocation 0 (writes go straight to Ceph); class 0 takes all
        self.assertEqual(HEADER + '0,unclassified,255,1.00\n'
                         '1,core_id:eq:%d&done,30,0.00\n' % core.core_id,
                         self.table())
        self.assertEqual(io_class_table.ShareStatus(30, None),
                         self.connector.cache_share(props))
        self.assertTrue(self.manager.is_drained(core.cache_id,
                                                core.core_id))
        self.manager.undrain(self.cache_of(core), core, core.core_id)
        self.assertEqual(HEADER + '0,unclassified,255,0.70\n'
                         '1,core_id:eq:%d&done,,0.30\n' % core.core_id,
                         self.table())
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_reattach_after_a_reboot_gets_the_class_back(self):
        props, _info, core = self.attach('volume-sh-boot', share=20,
                                         dirty=12)
        self.host.reboot()
        # the table came back with the cache metadata; an operator resets
        # it by hand while the core is inactive
        self.load_by_hand(HEADER + '0,unclassified,255,1\n')
        self.host.set_udev_loader(True)
        info = self.connector.connect_volume(props)
        self.assertEqual(1, len(self.host.state()['loader_added']))
        [again] = self.cores()
        self.assertEqual((core.core_id, True, 12),
                         (again.core_id, again.active, self.dirty(again)))
        self.assertEqual(20, info['cache_share'])
        self.assertEqual(HEADER + '0,unclassified,255,0.80\n'
                         '1,core_id:eq:%d&done,,0.20\n' % core.core_id,
                         self.table())
        self.connector.disconnect_volume(props, info)
        self.assertEqual(HEADER + '0,unclassified,255,1.00\n', self.table())
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()

    def test_reboot_keeps_a_drained_share_drained(self):
        props, _info, core = self.attach('volume-sh-dboot', share=15,
                                         dirty=5)
        self.manager.drain(self.cache_of(core), core, 10)
        self.host.reboot()
        self.host.set_udev_loader(True)
        info = self.connector.connect_volume(props)
        self.assertIsNone(info['cache_share'])
        self.assertTrue(self.manager.is_drained(core.cache_id,
                                                core.core_id))
        again = self.core_with_id(core.cache_id, core.core_id)
        self.manager.undrain(self.cache_of(again), again, again.core_id)
        self.assertEqual(HEADER + '0,unclassified,255,0.85\n'
                         '1,core_id:eq:%d&done,,0.15\n' % core.core_id,
                         self.table())
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_new_core_does_not_inherit_a_share_class(self):
        props, _info, core = self.attach('volume-sh-gone', 'wt', share=50)
        self.host.reboot()
        # wt: the inactive clean core is removed as it is; its class
        # stays in the saved table until the next change
        self._tool('casadm', '--remove-inactive', '--cache-id', '1',
                   '--core-id', str(core.core_id))
        self.assertIn('core_id:eq:%d&done' % core.core_id, self.table(1))
        new_props, new_info, new = self.attach('volume-sh-new', 'wt')
        self.assertEqual(core.core_id, new.core_id)
        self.assertEqual(HEADER + '0,unclassified,255,1.00\n', self.table(1))
        self.connector.disconnect_volume(new_props, new_info)
        self.connector.disconnect_volume(props, None)
        self.assert_clean_host()

    def test_new_core_does_not_inherit_a_drain_class(self):
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        props, _info, core = self.attach('volume-sh-dgone', share=5)
        self.manager.drain(self.cache_of(core), core, 10)
        self.host.reboot()
        self._tool('casadm', '--remove-inactive', '--cache-id', '2',
                   '--core-id', str(core.core_id))
        new_props, new_info, new = self.attach('volume-sh-dnew', share=7)
        self.assertEqual(core.core_id, new.core_id)
        self.assertIn('Dropped the IO class (drain) an earlier core left '
                      'for core %d of cache instance 2' % new.core_id,
                      logs.output)
        self.assertEqual(HEADER + '0,unclassified,255,0.93\n'
                         '1,core_id:eq:%d&done,,0.07\n' % new.core_id,
                         self.table())
        self.connector.disconnect_volume(new_props, new_info)
        self.connector.disconnect_volume(props, None)
        self.assert_clean_host()

    def test_first_attach_after_a_reboot_recomposes_the_metadata_table(
            self):
        """The loader re-activates cores; the table is the metadata's.

        Here an older one: a's share as it was, a class of a core that is
        gone, a rule that is not os-brick-cas's. The first attach (of a
        volume without a share) composes the table again; each volume's
        own attach then puts its share in place.
        """
        props_a, _info, a = self.attach('volume-sh-ra', share=20, dirty=4)
        props_b, _info, b = self.attach('volume-sh-rb', share=30, dirty=4)
        props_c, _info, c = self.attach('volume-sh-rc', dirty=4)
        self.host.reboot()
        self.load_by_hand(HEADER + '0,unclassified,255,0.10\n'
                          '1,core_id:eq:%d&done,,0.50\n'
                          '2,core_id:eq:9&done,,0.30\n'
                          '3,core_id:eq:%d,,0.10\n' % (a.core_id, b.core_id))
        self.host.set_udev_loader(True)
        info_c = self.connector.connect_volume(props_c)
        self.assertNotIn('cache_share', info_c)
        self.assertEqual(HEADER + '0,unclassified,255,0.50\n'
                         '1,core_id:eq:%d&done,,0.50\n' % a.core_id,
                         self.table())
        info_a = self.connector.connect_volume(props_a)
        info_b = self.connector.connect_volume(props_b)
        self.assertEqual((20, 30), (info_a['cache_share'],
                                    info_b['cache_share']))
        self.assertEqual(HEADER + '0,unclassified,255,0.50\n'
                         '1,core_id:eq:%d&done,,0.20\n'
                         '2,core_id:eq:%d&done,,0.30\n'
                         % (a.core_id, b.core_id), self.table())
        for props, info in ((props_a, info_a), (props_b, info_b),
                            (props_c, info_c)):
            self.connector.disconnect_volume(props, info)
        self.assertEqual(HEADER + '0,unclassified,255,1.00\n', self.table())
        self.assertEqual(c.cache_id, 2)
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()

    def test_detach_after_a_reboot_recomposes_the_metadata_table(self):
        """The path of ``recover`` (an orphan's detach) after a reboot.

        The volume leaving had no class; the table still loses the gone
        core's class and gives class 0 what the shares leave.
        """
        props_a, _info, a = self.attach('volume-sh-da', share=20, dirty=4)
        props_b, _info, b = self.attach('volume-sh-db', dirty=4)
        self.host.reboot()
        self.load_by_hand(HEADER + '0,unclassified,255,0.50\n'
                          '1,core_id:eq:%d&done,,0.20\n'
                          '2,core_id:eq:9&done,,0.30\n' % a.core_id)
        # b's detach maps it, re-activates and flushes its core
        self.connector.disconnect_volume(props_b, None)
        self.assertEqual(HEADER + '0,unclassified,255,0.80\n'
                         '1,core_id:eq:%d&done,,0.20\n' % a.core_id,
                         self.table())
        self.assertNotEqual(a.core_id, b.core_id)
        self.connector.disconnect_volume(props_a, None)
        self.assertEqual(HEADER + '0,unclassified,255,1.00\n', self.table())
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()

    def load_by_hand(self, text: str, cache_id: int = 2) -> None:
        path = os.path.join(self.tmp, 'by-hand.csv')
        with open(path, 'w') as table:
            table.write(text)
        self._tool('casadm', '-C', '-C', '-i', str(cache_id), '-f', path)


class ShareBudgetTestCase(ShareBase):

    def test_shares_beyond_100_percent_lose_newest_first(self):
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        props_a, info_a, a = self.attach('volume-sh-60', share=60)
        props_b, info_b, b = self.attach('volume-sh-50', share=50)
        self.assertEqual((60, None), (info_a['cache_share'],
                                      info_b['cache_share']))
        self.assertEqual(io_class_table.ShareStatus(50, None),
                         self.connector.cache_share(props_b))
        self.assertIn('core %d of cache instance 2 gets no IO class for '
                      'its cache share' % b.core_id, logs.output)
        self.assertIn('asked for a 50% cache share and has none',
                      logs.output)
        # b is cached uncapped in class 0 (what a's share leaves)
        self.assertEqual(HEADER + '0,unclassified,255,0.40\n'
                         '1,core_id:eq:%d&done,,0.60\n' % a.core_id,
                         self.table())
        # a's detach frees the percent; b gets it at its next attach
        self.connector.disconnect_volume(props_a, info_a)
        info_b = self.connector.connect_volume(props_b)
        self.assertEqual(50, info_b['cache_share'])
        self.connector.disconnect_volume(props_b, info_b)
        self.assert_clean_host()

    def test_a_drain_takes_the_class_of_the_newest_share(self):
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        shared = [self.attach('volume-sh-%02d' % n, share=1)
                  for n in range(32)]
        props, info, core = self.attach('volume-sh-drained', dirty=3)
        self.assertEqual(33, self.table().count('\n') - 1)
        self.manager.drain(self.cache_of(core), core, 10)
        self.assertEqual(0, self.dirty(core))
        newest = shared[-1][2]
        self.assertIn('core %d of cache instance 2 gets no IO class for '
                      'its cache share' % newest.core_id, logs.output)
        self.assertEqual(io_class_table.ShareStatus(1, None),
                         self.connector.cache_share(shared[-1][0]))
        self.assertEqual(io_class_table.ShareStatus(1, 1),
                         self.connector.cache_share(shared[-2][0]))
        table = self.table()
        self.assertNotIn('core_id:eq:%d&done' % newest.core_id, table)
        self.assertIn('32,core_id:eq:%d&done,0,0.00' % core.core_id, table)
        self.assertIn('0,unclassified,255,0.69', table)
        # the undrain frees the class; the share gets it at its next
        # attach (the table is the only record of shares)
        self.manager.undrain(self.cache_of(core), core, core.core_id)
        self.assertEqual(io_class_table.ShareStatus(1, None),
                         self.connector.cache_share(shared[-1][0]))
        again = self.connector.connect_volume(shared[-1][0])
        self.assertEqual(1, again['cache_share'])
        for props_x, info_x, _x in shared + [(props, info, core)]:
            self.connector.disconnect_volume(props_x, info_x)
        self.assert_clean_host()
