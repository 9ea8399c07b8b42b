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

from os_brick_cas import casadm
from os_brick_cas import lifecycle
from tests.nova.functional import base
from tests.nova.functional import test_lifecycle

WB_VOL = test_lifecycle.WB_VOL


class Killed(BaseException):
    """A process stopped by kill -9: no except clause and no finally."""


class MarkerProtocolTestCase(test_lifecycle.LifecycleTestBase):

    def fail_clear_once(self) -> list:
        """The next marker clear is answered 503 (Cinder left it as is)."""
        failed = []
        original = self.cinder._action

        def action(request, context):
            if ('os-brick-cas-clear-fence' in request.json() and
                    not failed):
                failed.append(request.path)
                context.status_code = 503
                return '{}'
            return original(request, context)

        self.cinder.adapter.register_uri(
            'POST', re.compile(base.CINDER + '/volumes/[^/]+/action$'),
            status_code=202, text=action)
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
