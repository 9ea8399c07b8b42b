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

"""Issue 32, points 2 and 5: nova's marker path and unfinished transitions.

nova's real compute manager drives the volume driver; the fake Cinder
answers one marker call with a 503, or the operator's drain dies mid-way.
After every step Cinder is never stronger than the host: a marker that
says "drained" for this host means the core is pinned and holds 0 dirty
blocks.
"""

import re

import fixtures
import requests

from os_brick_cas import casadm
from os_brick_cas import lifecycle
from tests.nova.functional import base
from tests.nova.functional import test_lifecycle

WB_VOL = test_lifecycle.WB_VOL


class Killed(BaseException):
    """A process stopped by kill -9: no except clause and no finally."""


def intercept_clears(cinder, answer) -> None:
    """Send the fake Cinder's marker clears to *answer*.

    ``answer(request, context, original)`` returns the response text;
    *original* is the fake Cinder's own action handler.
    """
    original = cinder._action

    def action(request, context):
        if 'os-brick-cas-clear-fence' in request.json():
            return answer(request, context, original)
        return original(request, context)

    cinder.adapter.register_uri(
        'POST', re.compile(base.CINDER + '/volumes/[^/]+/action$'),
        status_code=202, text=action)


class MarkerProtocolTestCase(test_lifecycle.LifecycleTestBase):

    def fail_clear_once(self) -> list:
        """The next marker clear is answered 503 (Cinder left it as is)."""
        failed = []

        def answer(request, context, original):
            if failed:
                return original(request, context)
            failed.append(request.path)
            context.status_code = 503
            return '{}'

        intercept_clears(self.cinder, answer)
        return failed

    def assert_cinder_no_stronger_than_host(self) -> None:
        if WB_VOL not in self.cinder.drained:
            return
        [core] = self.cores()
        self.assertIn(core.core_id, self.drained_on('compute1'),
                      'Cinder records the volume drained, but its core '
                      'caches writes')
        self.assertEqual(0, self.dirty('compute1', core))

    def test_reattach_after_a_failed_clear_never_leaves_cinder_drained(self):
        server, core = self.server_with_dirty_wb(64)
        code, text = self.cli('drain', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(0, code, text)
        self.assertIn(WB_VOL, self.cinder.drained)
        failed = self.fail_clear_once()

        # nova's hard reboot: detach (its clear answered 503), re-attach
        # with the same attachment; the new core caches writes
        self._reboot_server(server, hard=True)
        self.assertEqual(1, len(failed))
        [after] = self.cores()
        self.assert_cinder_no_stronger_than_host()
        # the guest writes again: Cinder must not allow a snapshot now
        self.host.set_dirty(after.cache_id, after.core_id, 8)
        self.assert_cinder_no_stronger_than_host()

    def test_failed_clear_is_journaled_and_retried_by_the_periodic_task(
            self):
        server, core = self.server_with_dirty_wb(16)
        failed = self.fail_clear_once()
        self.detach(server, WB_VOL)
        self.assertEqual(1, len(failed))
        self.assertEqual([], self.cores())
        # the marker still names this host, and the host says so
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        [record] = list(lifecycle.records())
        self.assertIn(record.state, lifecycle.IN_FLIGHT)
        # doctor and the exporter show it meanwhile
        [drift] = lifecycle.drift(casadm.Casadm())
        self.assertEqual(('journal', WB_VOL), (drift.kind, drift.volume))
        # nova's periodic task retries the clear: nothing waits for a human
        self._run_periodics()
        self.assertEqual({}, self.cinder.fences)
        self.assertEqual([], list(lifecycle.records()))


class UnfinishedDrainTestCase(test_lifecycle.LifecycleTestBase):

    def kill_drain_mid_flush(self) -> None:
        """``os-brick-cas drain`` stopped by kill -9 during its flush.

        The pin is loaded, the flush had begun; the process is gone, so
        its volume lock is free and its journal record says draining.
        """
        def killed_flush(casadm, cache_id, core_id, *args, **kwargs):
            raise Killed('kill -9 during the flush')

        with fixtures.MonkeyPatch('os_brick_cas.casadm.Casadm.flush',
                                  killed_flush):
            self.assertRaises(Killed, self.cli, 'drain', '--volume', WB_VOL,
                              '--host', 'compute1')
        [record] = list(lifecycle.records())
        self.assertEqual(lifecycle.DRAINING, record.state)

    def test_nova_detach_resolves_a_drain_killed_mid_flush(self):
        server, core = self.server_with_dirty_wb(32)
        self.kill_drain_mid_flush()
        self.assertIn(core.core_id, self.drained_on('compute1'))

        # nova's own detach (e.g. deleting the server) finishes it first
        self.detach(server, WB_VOL)
        self.assertEqual([], self.cores())
        self.assertEqual(32, self.host.state()['flushed_blocks'])
        self.assertEqual({}, self.cinder.fences)
        self.assertEqual([], list(lifecycle.records()))

    def test_periodic_task_resolves_a_drain_killed_mid_flush(self):
        server, core = self.server_with_dirty_wb(32)
        self.kill_drain_mid_flush()
        self._run_periodics()
        self.assertEqual([], list(lifecycle.records()))
        self.assertEqual(set(), self.drained_on('compute1'))
        self.assertNotIn(WB_VOL, self.cinder.drained)
        [after] = self.cores()
        self.assertEqual(core.core_id, after.core_id)


class LostAnswerTestCase(test_lifecycle.LifecycleTestBase):
    """Cinder applies a marker clear, but nova-compute never hears back."""

    def lose_clear_answer_once(self) -> list:
        """The next marker clear is applied; its answer is a read timeout."""
        lost = []

        def answer(request, context, original):
            text = original(request, context)
            if lost:
                return text
            lost.append(request.path)
            raise requests.exceptions.ReadTimeout(
                'Cinder applied the clear; its answer was lost')

        intercept_clears(self.cinder, answer)
        return lost

    def test_detach_whose_clear_answer_is_lost_is_resolved_not_redone(self):
        server, core = self.server_with_dirty_wb(16)
        lost = self.lose_clear_answer_once()
        self.detach(server, WB_VOL)
        self.assertEqual(1, len(lost))
        # the data reached Ceph before the clear; the core is gone
        self.assertEqual([], self.cores())
        self.assertEqual(16, self.host.state()['flushed_blocks'])
        # Cinder took the clear; this host does not know it yet
        self.assertEqual({}, self.cinder.fences)
        [record] = list(lifecycle.records())
        self.assertIn(record.state, lifecycle.IN_FLIGHT)
        [drift] = lifecycle.drift(casadm.Casadm())
        self.assertEqual(('journal', WB_VOL), (drift.kind, drift.volume))
        # the retry finds the clear done: nothing is asked of anyone
        self._run_periodics()
        self.assertEqual([], list(lifecycle.records()))
        self.assertEqual({}, self.cinder.fences)
        # and the volume can be attached and cached again
        self._attach_volume(server, WB_VOL)
        [again] = self.cores()
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        self.assertNotIn(again.core_id, self.drained_on('compute1'))


class SwitchoverCleanupTestCase(test_lifecycle.TwoComputesTestBase):
    """The source's clean-up after a live migration's switchover.

    The destination took the marker over (compare-and-swap on the source's
    drained record) before the switchover; the source then detaches. It
    must never clear the marker (the destination caches the guest's
    writes now), neither then nor from its periodic task; the
    destination's own clear, refused once, is retried by its periodic task.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(
            test_lifecycle.LiveMigrationTestCase._migrate_fixture(self))

    def watch_clears(self) -> tuple[list, list]:
        """(hosts whose clear Cinder saw, failures still to answer 503)."""
        seen, fail_next = [], []

        def answer(request, context, original):
            seen.append(request.path)
            if fail_next:
                fail_next.pop()
                context.status_code = 503
                return '{}'
            return original(request, context)

        intercept_clears(self.cinder, answer)
        return seen, fail_next

    def test_source_never_clears_the_destination_marker(self):
        self._attach_volume(self.server, WB_VOL)
        [source_core] = self.cores('compute1')
        self.host.set_dirty(source_core.cache_id, source_core.core_id, 64)
        clears, fail_next = self.watch_clears()
        self.admin_api.post_server_action(self.server['id'], {
            'os-migrateLive': {'host': 'compute2',
                               'block_migration': 'auto'}})
        server = self._wait_for_server_parameter(
            self.server, {'OS-EXT-SRV-ATTR:host': 'compute2',
                          'status': 'ACTIVE'})
        self.assertEqual(64, self.host.state()['flushed_blocks'])
        self.assertEqual([], self.cores('compute1'))
        [dest_core] = self.cores('compute2')
        # the source's detach asked Cinder for nothing: not its marker
        self.assertEqual([], clears)
        self.assertEqual({WB_VOL: 'compute2'}, self.cinder.fences)
        # the destination's write-back core holds dirty data now
        self.hosts['compute2'].set_dirty(2, dest_core.core_id, 8)
        for _ in range(2):
            self._run_periodics()
            self.assertEqual([], clears)
            self.assertEqual({WB_VOL: 'compute2'}, self.cinder.fences)
            self.assertNotIn(WB_VOL, self.cinder.drained)
        with self.on_host('compute1'):
            self.assertEqual([], list(lifecycle.records()))
        # the destination's detach flushes; its clear is refused once
        fail_next.append(True)
        self.detach(server, WB_VOL)
        self.assertEqual([], self.cores('compute2'))
        self.assertEqual({WB_VOL: 'compute2'}, self.cinder.fences)
        with self.on_host('compute2'):
            [record] = list(lifecycle.records())
            self.assertIn(record.state, lifecycle.IN_FLIGHT)
        self._run_periodics()
        self.assertEqual({}, self.cinder.fences)
        self.assertEqual(2, len(clears))
