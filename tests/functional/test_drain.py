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

"""Drain/undrain through the real casadm path (issue 15, first slice).

The stand-in casadm stores and lists IO-class tables as casadm does; the
data-true behaviour (writes bypassing the cache) is on the real-Ceph tier.
"""

import contextlib
import io
import json
import subprocess
import time
import uuid

import fixtures

from os_brick_cas import casadm
from os_brick_cas.cmd import doctor
from os_brick_cas.cmd import main as cli
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas.metrics import eventlog
from os_brick_cas.opencas import casadm_output
from os_brick_cas import report
from tests.functional import base
from tests.functional import fake_cinder


class DrainBase(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        self.casadm = casadm.Casadm()
        self.manager = drain.DrainManager(self.casadm)

    def attach_dirty(self, name: str, dirty: int = 40):
        props = self.props(self.image(name), 'wb')
        info = self.connector.connect_volume(props)
        [core] = [c for c in self.cores() if name in c.device.replace(
            '%2D', '-')]
        self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return props, info, core

    def cache_of(self, core):
        [cache] = [c for c in self.casadm.list_caches()
                   if c.cache_id == core.cache_id]
        return cache

    def io_class_csv(self, cache_id: int) -> str:
        return subprocess.run(
            ['casadm', '--io-class', '--list', '--cache-id', str(cache_id),
             '--output-format', 'csv'], capture_output=True, text=True,
            check=True).stdout

    def loads(self) -> int:
        """IO-class tables loaded so far (``--io-class --load-config``)."""
        return len([c for c in self.host.calls(verb='io-class')
                    if '--load-config' in c['argv'] or
                    c['argv'][1:3] == ['-C', '-C']])

    def core_with_id(self, cache_id: int, core_id: int) -> casadm_output.Core:
        [core] = [c for c in self.cores()
                  if (c.cache_id, c.core_id) == (cache_id, core_id)]
        return core

    def cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(argv))
        return code, out.getvalue(), err.getvalue()

    def status_drained(self) -> dict[tuple[int, int], bool]:
        code, out, err = self.cli('status', '--format', 'json')
        self.assertEqual(0, code, err)
        return {(c['cache_id'], c['core_id']): c['drained']
                for cache in json.loads(out)['caches'] for c in cache['cores']}


class DrainTestCase(DrainBase):

    def test_drain_flushes_and_pins_the_core_then_undrain_unpins(self):
        props, info, core = self.attach_dirty('volume-drain')
        events = eventlog.EventCollector()
        self.manager.drain(self.cache_of(core), core, 10)
        self.assertEqual(0, self.dirty(core))
        # the exporter sees the drain's duration
        [family] = [f for f in events.collect()
                    if f.name == 'os_brick_cas_drain_seconds']
        self.assertEqual(1, [s.value for s in family.samples
                             if s.name.endswith('_count') and
                             s.labels['result'] == 'ok'][0])
        self.assertIn('%d,core_id:eq:%d&done,0,0.00' % (1, core.core_id),
                      self.io_class_csv(core.cache_id))
        self.assertTrue(self.manager.is_drained(core.cache_id,
                                                core.core_id))
        # status shows it
        [core_report] = [c for cache in report.host_report(self.casadm)
                         for c in cache.cores if c.core_id == core.core_id
                         and c.cache_id == core.cache_id]
        self.assertTrue(core_report.drained)
        # idempotent: a second drain loads nothing new
        loads = len(self.host.calls(verb='io-class'))
        self.manager.drain(self.cache_of(core), core, 10)
        self.assertEqual(loads + 1, len(self.host.calls(verb='io-class')))
        self.manager.undrain(self.cache_of(core), core, core.core_id)
        self.assertNotIn('core_id:eq:', self.io_class_csv(core.cache_id))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_failed_flush_keeps_the_core_drained_and_its_data(self):
        props, info, core = self.attach_dirty('volume-drain-fail')
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core device\n')
        self.assertRaises(exception.FlushFailed, self.manager.drain,
                          self.cache_of(core), core, 10)
        self.assertEqual(40, self.dirty(core))
        self.assertTrue(self.manager.is_drained(core.cache_id,
                                                core.core_id))

    def test_classes_of_removed_cores_are_dropped(self):
        props_a, info_a, core_a = self.attach_dirty('volume-drain-a')
        props_b, info_b, core_b = self.attach_dirty('volume-drain-b')
        self.manager.drain(self.cache_of(core_a), core_a, 10)
        self.connector.disconnect_volume(props_a, info_a)
        # the detach dropped core a's class: a new core with its id would
        # otherwise inherit it
        self.assertNotIn('core_id:eq:', self.io_class_csv(core_a.cache_id))
        self.manager.drain(self.cache_of(core_b), core_b, 10)
        table = self.io_class_csv(core_b.cache_id)
        self.assertIn('core_id:eq:%d&done' % core_b.core_id, table)
        self.assertEqual(1, table.count('core_id:eq:'))
        self.manager.undrain(self.cache_of(core_b), core_b, core_b.core_id)
        self.connector.disconnect_volume(props_b, info_b)

    def test_compose_refuses_beyond_32_drained_cores(self):
        self.assertEqual(33, len(drain.compose(set(range(1, 33)))))
        self.assertRaises(ValueError, drain.compose, set(range(1, 34)))

    def test_drain_and_undrain_twice_load_the_table_once_each(self):
        props, info, core = self.attach_dirty('volume-idem')
        self.manager.drain(self.cache_of(core), core, 10)
        table, loads = self.io_class_csv(core.cache_id), self.loads()
        self.manager.drain(self.cache_of(core), core, 10)
        self.assertEqual((table, loads),
                         (self.io_class_csv(core.cache_id), self.loads()))
        self.manager.undrain(self.cache_of(core), core, core.core_id)
        table, loads = self.io_class_csv(core.cache_id), self.loads()
        self.assertNotIn('core_id:eq:', table)
        self.manager.undrain(self.cache_of(core), core, core.core_id)
        self.assertEqual((table, loads),
                         (self.io_class_csv(core.cache_id), self.loads()))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()


class CrashTestCase(DrainBase):
    """A host that dies mid-drain comes back in a state the manager knows."""

    def test_reboot_after_failed_flush_keeps_the_core_drained(self):
        props, info, core = self.attach_dirty('volume-crash')
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core device\n')
        self.assertRaises(exception.FlushFailed, self.manager.drain,
                          self.cache_of(core), core, 10)
        self.host.reboot()
        info = self.connector.connect_volume(props)
        again = self.core_with_id(core.cache_id, core.core_id)
        self.assertTrue(again.active)
        self.assertEqual(40, self.dirty(again))
        # the table came back with the cache metadata
        self.assertTrue(self.manager.is_drained(core.cache_id, core.core_id))
        self.assertEqual({(core.cache_id, core.core_id): True},
                         self.status_drained())
        self.manager.undrain(self.cache_of(again), again, again.core_id)
        self.assertEqual({(core.cache_id, core.core_id): False},
                         self.status_drained())
        self.manager.drain(self.cache_of(again), again, 10)
        self.assertEqual(0, self.dirty(again))
        # detach of a drained core flushes, removes it and drops its class
        self.connector.disconnect_volume(props, info)
        self.assertNotIn('core_id:eq:', self.io_class_csv(core.cache_id))
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()

    def test_core_removed_while_down_passes_no_class_to_a_new_core(self):
        props, info, core = self.attach_dirty('volume-gone')
        self.manager.drain(self.cache_of(core), core, 10)
        self.host.reboot()
        # detach after the reboot: the clean inactive core is removed as it
        # is (--remove-inactive), its class stays in the saved table
        self.connector.disconnect_volume(props, None)
        self.assertEqual([], self.cores())
        self.assertTrue(self.host.calls(verb='remove-inactive'))
        new_props, new_info, new = self.attach_dirty('volume-new', dirty=0)
        self.assertEqual((core.cache_id, core.core_id),
                         (new.cache_id, new.core_id))
        self.assertFalse(self.manager.is_drained(new.cache_id, new.core_id))
        self.assertEqual({(new.cache_id, new.core_id): False},
                         self.status_drained())
        self.connector.disconnect_volume(new_props, new_info)
        self.assert_clean_host()

    def test_next_change_drops_the_class_of_a_core_gone_while_down(self):
        props_a, _, core_a = self.attach_dirty('volume-down-a')
        props_b, _, core_b = self.attach_dirty('volume-down-b')
        self.manager.drain(self.cache_of(core_a), core_a, 10)
        self.host.reboot()
        # an operator removes a's inactive (clean) core by hand
        self._tool('casadm', '--remove-inactive', '--cache-id',
                   str(core_a.cache_id), '--core-id', str(core_a.core_id))
        info_b = self.connector.connect_volume(props_b)
        b = self.core_with_id(core_b.cache_id, core_b.core_id)
        self.manager.drain(self.cache_of(b), b, 10)
        table = self.io_class_csv(b.cache_id)
        self.assertEqual(1, table.count('core_id:eq:'), table)
        self.assertIn('core_id:eq:%d&done' % b.core_id, table)
        self.manager.undrain(self.cache_of(b), b, b.core_id)
        self.connector.disconnect_volume(props_b, info_b)
        self.connector.disconnect_volume(props_a, None)
        self.assert_clean_host()


VOL_A = str(uuid.UUID(int=0xd1))
VOL_B = str(uuid.UUID(int=0xd2))
VOL_WT = str(uuid.UUID(int=0xd3))


class DrainCliTestCase(DrainBase):
    """``os-brick-cas drain|undrain --volume ID | --all``."""

    caches = {1: 'wt', 2: 'wb'}

    def with_cinder(self) -> fake_cinder.FakeCinder:
        """Give the CLI Cinder credentials (a fake Cinder behind them)."""
        cinder = fake_cinder.FakeCinder()
        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.cmd.cinder_session.session_factory', cinder.session))
        return cinder

    def attach_volume(self, volume_id: str, mode: str, dirty: int = 0):
        props = self.props(self.image('volume-' + volume_id), mode,
                           volume_id=volume_id)
        info = self.connector.connect_volume(props)
        [core] = [c for c in self.cores() if volume_id in
                  report.rbd_image_of(c.device)]
        if dirty:
            self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return props, info, core

    def test_drain_all_then_undrain_all(self):
        _, _, core_a = self.attach_volume(VOL_A, 'wb', dirty=30)
        _, _, core_b = self.attach_volume(VOL_B, 'wb', dirty=12)
        _, _, core_wt = self.attach_volume(VOL_WT, 'wt')
        code, out, err = self.cli('drain', '--all')
        self.assertEqual(0, code, err)
        lines = [line for line in out.splitlines()     # not the log lines
                 if line.startswith('volume ') and 'Cinder' not in line]
        # no Cinder credentials here: the drain holds, Cinder is not told
        self.assertEqual(2, out.count('Cinder not told (no credentials'))
        self.assertIn('volume %s: draining 30 dirty blocks' % VOL_A,
                      lines[0])
        self.assertRegex(lines[1], r'^volume %s drained in \d+\.\ds \(30 '
                                   r'dirty blocks flushed\)' % VOL_A)
        self.assertIn('volume %s drained in' % VOL_B, lines[3])
        self.assertEqual(4, len(lines), out)     # the wt volume untouched
        self.assertEqual((0, 0), (self.dirty(core_a), self.dirty(core_b)))
        self.assertEqual({(2, core_a.core_id): True,
                          (2, core_b.core_id): True,
                          (1, core_wt.core_id): False},
                         self.status_drained())
        self.assertEqual('os-brick-cas drain: end state: 2 of 2 volume(s) '
                         'drained', out.splitlines()[-1])
        # without credentials the undrain does not happen: Cinder may
        # record the volumes as drained (issue 21)
        code, out, err = self.cli('undrain', '--all')
        self.assertEqual(1, code)
        self.assertIn('Cinder cannot be told', err)
        self.assertIn('end state: 2 of 2 volume(s) NOT caching',
                      err.splitlines()[-1])
        self.assertIn('core_id:eq:', self.io_class_csv(2))
        cinder = self.with_cinder()
        code, out, err = self.cli('undrain', '--all')
        self.assertEqual(0, code, err)
        self.assertEqual(['volume %s undrained: Cinder records it as cached '
                          'by this host, and writes are cached again' % v
                          for v in (VOL_A, VOL_B)],
                         [line for line in out.splitlines()
                          if line.startswith('volume ')])
        self.assertEqual({VOL_A, VOL_B}, set(cinder.markers))
        self.assertNotIn('core_id:eq:', self.io_class_csv(2))
        # nothing left to undrain: said, not an error
        self.assertEqual((0, 'os-brick-cas undrain: end state: no drained '
                             'volume on this host: nothing to undrain\n',
                          ''), self.cli('undrain', '--all'))

    def test_drain_without_cinder_warns_first_that_undrain_needs_it(self):
        # main: the drain succeeded silently (but for WARNING log lines
        # with time stamps and logger names) and the undrain ending the
        # maintenance then refused
        self.attach_volume(VOL_A, 'wb', dirty=30)
        both = io.StringIO()
        with contextlib.redirect_stdout(both), \
                contextlib.redirect_stderr(both):
            code = cli.main(['drain', '--all'])
        self.assertEqual(0, code, both.getvalue())
        lines = both.getvalue().splitlines()
        self.assertIn('os-brick-cas drain: warning: Cinder cannot be told '
                      '(no credentials', lines[0])
        self.assertIn('"os-brick-cas undrain" that ends the maintenance '
                      'refuses until it can reach Cinder: set OS_CLOUD',
                      lines[0])
        self.assertIn('volume %s: draining 30 dirty blocks' % VOL_A,
                      lines[1])
        # without -v, what the library logs is one plain line naming the
        # command, like the command's own messages
        code, out, err = self.cli('undrain', '--all')
        self.assertEqual(1, code)
        for line in err.splitlines():
            self.assertRegex(line, r'^(os-brick-cas undrain: |volume )',
                             err)
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, err)
        for line in err.splitlines():
            self.assertTrue(line.startswith('os-brick-cas drain: '), err)
        self.assertNotRegex(err, r'WARNING|\d\d:\d\d:\d\d')

    def test_a_failed_volume_is_listed_and_the_rest_still_drained(self):
        _, _, core_a = self.attach_volume(VOL_A, 'wb', dirty=30)
        _, _, core_b = self.attach_volume(VOL_B, 'wb', dirty=12)
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core device\n')
        code, out, err = self.cli('drain', '--all')
        self.assertEqual(1, code)
        self.assertIn('volume %s: NOT drained' % VOL_A, err)
        self.assertIn('Error while writing to core device', err)
        self.assertIn('end state: 1 of 2 volume(s) NOT drained: %s;' % VOL_A,
                      err.splitlines()[-1])
        self.assertIn('volume %s drained in' % VOL_B, out)
        self.assertEqual((30, 0), (self.dirty(core_a), self.dirty(core_b)))
        # a failed flush leaves the core drained: no new dirty data
        self.assertTrue(self.manager.is_drained(2, core_a.core_id))
        self.assertEqual(0, self.cli('drain', '--volume', VOL_A)[0])
        self.assertEqual(0, self.dirty(core_a))

    def test_one_overall_time_bound(self):
        self.attach_volume(VOL_A, 'wb', dirty=30)
        _, _, core_b = self.attach_volume(VOL_B, 'wb', dirty=30)
        self.host.set_flush_speed(200)          # 6 s per volume
        start = time.monotonic()
        # a gets 10 s, b what is left (under 4 s): b is not drained. The
        # 4 s of slack on each side are for a loaded machine (a 6-s bound
        # with 3-s flushes failed at a load of 3: a's casadm calls took
        # more than the 3 s left over)
        code, out, err = self.cli('drain', '--all', '--timeout', '10')
        self.assertLess(time.monotonic() - start, 10 + 3)
        self.assertEqual(1, code)
        self.assertIn('volume %s drained in' % VOL_A, out)
        self.assertIn('volume %s: NOT drained: ' % VOL_B, err)
        self.assertEqual(30, self.dirty(core_b))
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])

    def test_volume_and_all_are_exclusive_and_help_states_the_bound(self):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            self.assertRaises(SystemExit, cli.main,
                              ['drain', '--all', '--volume', VOL_A])
            self.assertRaises(SystemExit, cli.main, ['undrain'])
            self.assertEqual(0, cli.main(['drain', '--help']))
        self.assertIn('not allowed with argument', err.getvalue())
        self.assertIn('flush_timeout times the number of volumes',
                      ' '.join(out.getvalue().split()))

    def test_old_release_refuses_before_changing_anything(self):
        _, _, core_a = self.attach_volume(VOL_A, 'wb', dirty=5)
        self.host.set_version('22.6.3.0724.release')
        code, _, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(1, code)
        self.assertIn('older than v24.9', err)
        self.assertEqual(0, self.loads())
        self.assertEqual(5, self.dirty(core_a))


class CapabilityTestCase(DrainBase):
    """unsupported_reason() and doctor's finding per wb/wo instance."""

    caches = {1: 'wt', 2: 'wb'}

    def instance(self) -> casadm_output.CacheInstance:
        [cache] = [c for c in self.casadm.list_caches() if c.cache_id == 2]
        return cache

    def reason(self) -> str:
        return drain.unsupported_reason(self.casadm, self.instance())

    def drain_findings(self) -> list[str]:
        return [str(f) for f in doctor.check_host(self.casadm)
                if 'can drain' in f.message or 'cannot drain' in f.message]

    def test_current_release_can_drain(self):
        self.assertIsNone(self.reason())
        self.assertEqual(['OK   instance 2 can drain (live migration of '
                          'write-back volumes allowed)'],
                         self.drain_findings())

    def test_release_before_24_9_cannot(self):
        self.host.set_version('22.6.3.0724.release')
        self.assertIn('Open CAS 22.6.3.0724.release is older than v24.9',
                      self.reason())
        self.assertIn('upgrade Open CAS', self.reason())
        [finding] = self.drain_findings()
        self.assertTrue(finding.startswith('WARN instance 2 (wb) cannot '
                                           'drain'), finding)
        self.host.set_version('24.9.0.0900.release')
        self.assertIsNone(self.reason())

    def test_incomplete_instance_cannot(self):
        self.attach_dirty('volume-cap')
        self.host.reboot()
        self.assertIn('cache instance 2 is Incomplete', self.reason())
