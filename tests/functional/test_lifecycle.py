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

"""Named regressions of issue 21, through the CLI on the simulator.

Each is one class of path where Cinder's fence marker ended up stronger
than what the host guaranteed. They use only the CLI and the connector,
so the same tests run against the code before the life-cycle module.
"""

import contextlib
import io
import os
import threading
import time
import uuid

import fixtures

from os_brick_cas import casadm
from os_brick_cas.cmd import main as cli
from os_brick_cas import drain
from os_brick_cas import locks
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from os_brick_cas import rbd_names
from os_brick_cas import report
from tests.functional import base
from tests.functional import fake_cinder

HOST = 'compute-a'
VOL_A = str(uuid.UUID(int=0x21a))
VOL_B = str(uuid.UUID(int=0x21b))


class LifecycleRegressionBase(base.FunctionalTestCase):

    caches = {1: 'wt', 2: 'wb'}

    def setUp(self):
        super().setUp()
        # bounds with room for a loaded test machine; the time-bound test
        # sets its own
        self.conf.config(group=opts.GROUP, flush_timeout=30)
        self.casadm = casadm.Casadm()
        self.cinder = fake_cinder.FakeCinder()
        self.credentials(True)

    def credentials(self, present: bool) -> None:
        """The CLI has Cinder credentials (the fake Cinder), or none."""
        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.cmd.cinder_session.session_factory',
            self.cinder.session if present else None))

    def attach(self, volume_id: str, dirty: int = 0) -> casadm_output.Core:
        """Attach as nova does: the marker names this host first."""
        epoch = 'att-' + volume_id[-4:]
        self.cinder.markers[volume_id] = {'host': HOST, 'epoch': epoch,
                                          'drained': False}
        props = self.props(self.image('volume-' + volume_id), 'wb',
                           volume_id=volume_id, cas_epoch=epoch)
        self.connector.connect_volume(props)
        self.addCleanup(self.detach, props)
        core = self.core_of(volume_id)
        if dirty:
            self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return core

    def detach(self, props: dict) -> None:
        try:
            self.connector.disconnect_volume(props, None)
        except Exception:
            pass

    def core_of(self, volume_id: str) -> casadm_output.Core:
        [core] = [c for c in self.cores()
                  if volume_id in report.rbd_image_of(c.device)]
        return core

    def cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(argv) + ['--host', HOST])
        return code, out.getvalue(), err.getvalue()

    def pinned(self, core: casadm_output.Core) -> bool:
        return core.core_id in drain.drained_cores(
            self.casadm.list_io_classes(core.cache_id))

    def assert_cinder_no_stronger_than_host(self, volume_id: str) -> None:
        """I1: a marker saying drained means pinned and 0 dirty here."""
        owner = self.cinder.owner(volume_id)
        if owner is None or not owner.drained:
            return
        core = self.core_of(volume_id)
        self.assertTrue(self.pinned(core),
                        'Cinder records %s drained, but its core caches '
                        'writes' % volume_id)
        self.assertEqual(0, self.dirty(core))


class UndrainWithoutCinderTestCase(LifecycleRegressionBase):

    def test_undrain_while_cinder_cannot_be_told_does_not_happen(self):
        core = self.attach(VOL_A, dirty=20)
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, err)
        self.assertTrue(self.cinder.owner(VOL_A).drained)
        # the CLI without credentials: Cinder would keep "drained"
        self.credentials(False)
        code, out, err = self.cli('undrain', '--volume', VOL_A)
        self.assertEqual(1, code, out + err)
        self.assertIn('Cinder cannot be told', err)
        self.assertIn('NOT caching', err.splitlines()[-1])
        self.assertTrue(self.pinned(core))
        self.assert_cinder_no_stronger_than_host(VOL_A)
        # Cinder unreachable (503): the same
        self.credentials(True)
        self.cinder.down = True
        code, out, err = self.cli('undrain', '--volume', VOL_A)
        self.assertEqual(1, code, out + err)
        self.assertTrue(self.pinned(core))
        self.cinder.down = False
        code, out, err = self.cli('undrain', '--volume', VOL_A)
        self.assertEqual(0, code, err)
        self.assertFalse(self.pinned(core))
        self.assertFalse(self.cinder.owner(VOL_A).drained)


class RacingTransitionsTestCase(LifecycleRegressionBase):

    def test_undrain_during_a_drain_in_flight_waits_for_it(self):
        core = self.attach(VOL_A, dirty=40)
        self.host.set_flush_speed(50)           # a 2 s flush
        results = {}

        def drain_volume():
            results['drain'] = self.cli('drain', '--volume', VOL_A,
                                        '--timeout', '60')

        drainer = threading.Thread(target=drain_volume)
        drainer.start()
        deadline = time.monotonic() + 10
        while not self.pinned(core) and time.monotonic() < deadline:
            time.sleep(0.05)
        # an operator (or nova's periodic release) undrains meanwhile
        results['undrain'] = self.cli('undrain', '--volume', VOL_A)
        drainer.join()
        self.assertEqual(0, results['drain'][0], results['drain'])
        self.assertEqual(0, results['undrain'][0], results['undrain'])
        self.assert_cinder_no_stronger_than_host(VOL_A)
        # the undrain came last: caching, and Cinder says so
        self.assertFalse(self.pinned(core))
        self.assertFalse(self.cinder.owner(VOL_A).drained)


class SharedLockTestCase(LifecycleRegressionBase):

    def test_the_volume_lock_file_is_shared_with_the_nova_group(self):
        core = self.attach(VOL_A)
        spec = rbd_names.parse_link_name(os.path.basename(core.device))
        path = os.path.join(self.tmp, 'os-brick-cas-rbd-' + '-'.join(
            rbd_names.escape(part)
            for part in (spec.pool, spec.namespace, spec.image)))
        self.assertEqual(0o660, os.stat(path).st_mode & 0o777)


class StaleListingTestCase(LifecycleRegressionBase):

    def test_drain_keeps_the_class_of_a_drain_done_while_it_waited(self):
        self.attach(VOL_B, dirty=10)
        real_lock = locks.cache_lock
        interloped = []

        def cache_lock(cache_id, *args, **kwargs):
            # while B's drain waits for the instance lock, another process
            # attaches A and drains it
            if not interloped:
                interloped.append(True)
                self.attach(VOL_A, dirty=5)
                code, out, err = self.cli('drain', '--volume', VOL_A,
                                          '--timeout', '60')
                self.assertEqual(0, code, err)
            return real_lock(cache_id, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.locks.cache_lock', cache_lock))
        code, out, err = self.cli('drain', '--volume', VOL_B,
                                  '--timeout', '60')
        self.assertEqual(0, code, err)
        self.assertTrue(interloped)
        self.assertTrue(self.pinned(self.core_of(VOL_B)))
        self.assertTrue(self.pinned(self.core_of(VOL_A)),
                        "A's drain class was dropped by B's drain")
        self.assert_cinder_no_stronger_than_host(VOL_A)


class TimeBoundTestCase(LifecycleRegressionBase):

    def test_two_drains_on_one_instance_stay_within_their_bound(self):
        self.attach(VOL_A, dirty=50)
        self.attach(VOL_B, dirty=50)
        self.host.set_flush_speed(100)          # 5 s per volume
        took = {}

        def drain_volume(volume_id):
            # not self.cli: redirecting stdout is not per thread
            start = time.monotonic()
            code = cli.main(['drain', '--volume', volume_id, '--timeout',
                             '8', '--host', HOST])
            took[volume_id] = (code, time.monotonic() - start)

        threads = [threading.Thread(target=drain_volume, args=(v,))
                   for v in (VOL_A, VOL_B)]
        for thread in threads:
            thread.start()
            time.sleep(0.3)
        for thread in threads:
            thread.join()
        for volume_id, (code, seconds) in took.items():
            # the bound covers the wait for the instance lock too (plus
            # the casadm calls after it, each bounded on its own); two
            # 5 s flushes one after the other cannot both fit
            self.assertLess(seconds, 8 + 1.5, (volume_id, code))
        self.assertIn(1, [code for code, _seconds in took.values()])
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])


class DriftTestCase(LifecycleRegressionBase):

    def test_doctor_reports_a_hand_loaded_table_under_a_drained_marker(self):
        core = self.attach(VOL_A, dirty=10)
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, err)
        code, out, err = self.cli('doctor')
        self.assertNotIn('Cinder records it drained, but', out)
        # someone loads a table by hand: the drain class is gone, the
        # core caches writes while Cinder still says "drained"
        self.casadm.load_io_classes(core.cache_id, [drain.UNCLASSIFIED])
        code, out, err = self.cli('doctor')
        self.assertEqual(2, code, out)
        self.assertIn('FAIL %s: Cinder records it drained, but the IO-class '
                      'table does not drain core %d of cache instance %d'
                      % (VOL_A, core.core_id, core.cache_id), out)
        self.assertIn('os-brick-cas drain --volume %s' % VOL_A, out)
        # the way out it names works
        self.assertEqual(0, self.cli('drain', '--volume', VOL_A)[0])
        self.assertNotIn('Cinder records it drained, but',
                         self.cli('doctor')[1])


class EndStateTestCase(LifecycleRegressionBase):

    def test_drain_all_after_a_reboot_reports_inactive_dirty_cores(self):
        self.attach(VOL_A, dirty=10)
        self.host.reboot()
        code, out, err = self.cli('drain', '--all')
        self.assertEqual(1, code, out + err)
        self.assertNotIn('nothing to drain', out)
        self.assertIn('volume %s: NOT drained: ' % VOL_A, err)
        self.assertIn('inactive', err)
        self.assertEqual('os-brick-cas drain: end state: 1 of 1 volume(s) '
                         'NOT drained: %s' % VOL_A,
                         err.splitlines()[-1].split(';')[0])
