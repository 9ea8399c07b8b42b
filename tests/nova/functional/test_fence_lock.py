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

"""nova_ext's fence marker writes and the host change are one locked step.

nova-compute's cached volume driver (the compute's own instance) attaches
and detaches while Cinder's fence action pauses in the middle (the fake
Cinder at the HTTP boundary holds the request); another transition of the
same volume (what the CLI's drain runs once it found the volume, another
nova thread's attach) starts meanwhile and must wait for the whole step.
"""

import threading
import time
from typing import Optional

from nova_ext import volume_lifecycle
from os_brick_cas import casadm
from os_brick_cas import drain as drain_mod
from os_brick_cas import lifecycle
from os_brick_cas import volume as cas_volume
from tests.nova.functional import base
from tests.nova.functional import test_lifecycle

WB_VOL = test_lifecycle.WB_VOL
SET = 'os-brick-cas-set-fence'
CLEAR = 'os-brick-cas-clear-fence'
#: how long the other transition gets to (wrongly) run meanwhile
OVERLAP = 1.5


class PausingFenceCinder(base.FakeFenceCinder):
    """Holds one fence action of one thread until the test resumes it.

    *pause* is ``(thread name, action, 'before'|'after')``: the request
    waits before or after Cinder applied it. Every applied change is in
    :attr:`history` as (action, host, epoch).
    """

    def __init__(self):
        self.pause: Optional[tuple[str, str, str]] = None
        self.paused = threading.Event()
        self.resume = threading.Event()
        self.history: list[tuple[str, Optional[str], Optional[str]]] = []
        super().__init__()

    def _hold(self, action: str, when: str) -> None:
        if self.pause == (threading.current_thread().name, action, when):
            self.pause = None
            self.paused.set()
            assert self.resume.wait(30), 'never resumed'

    def _action(self, request, context):
        [action] = request.json()
        self._hold(action, 'before')
        text = super()._action(request, context)
        if context.status_code == 202:
            volume_id = request.path.split('/')[-2]
            self.history.append((action, self.fences.get(volume_id),
                                 self.epochs.get(volume_id)))
        self._hold(action, 'after')
        return text


class FenceUnderVolumeLockTestCase(test_lifecycle.LifecycleTestBase):

    def setUp(self):
        super().setUp()
        self.cinder = PausingFenceCinder()
        self.useFixture(base.fixtures.MonkeyPatch(
            'nova_ext.fence.client_factory', self.cinder.client))
        self.start_compute('compute1')
        self.flags(host='compute1')
        self.driver = self.computes['compute1'].driver.\
            _cached_rbd_volume_driver()
        info = self.rbd_info('volume-' + WB_VOL, 'wb')
        self.spec = cas_volume.from_connection_properties(info['data']).spec
        self.subject = lifecycle.Volume(self.spec, WB_VOL)
        self.errors: list[BaseException] = []

    def info(self, attachment: str) -> dict:
        info = self.rbd_info('volume-' + WB_VOL, 'wb')
        info['attachment_id'] = attachment
        return info

    def in_thread(self, name: str, action, *args, **kwargs
                  ) -> threading.Thread:
        """Start *action* in a thread called *name*; errors are kept."""
        def run():
            try:
                action(*args, **kwargs)
            except BaseException as exc:
                self.errors.append(exc)

        thread = threading.Thread(target=run, name=name)
        thread.start()
        self.addCleanup(thread.join, 60)
        self.addCleanup(self.cinder.resume.set)
        return thread

    def pause_nova(self, action: str, when: str, step, *args
                   ) -> threading.Thread:
        """Run nova's *step* until Cinder holds its fence *action*."""
        self.cinder.pause = ('nova', action, when)
        nova = self.in_thread('nova', step, *args)
        self.assertTrue(self.cinder.paused.wait(30),
                        'nova never reached its fence %s' % action)
        return nova

    def assert_waits_then_finishes(self, nova: threading.Thread,
                                   other: threading.Thread) -> None:
        """*other* waits while nova is paused in its locked step."""
        time.sleep(OVERLAP)
        self.assertTrue(other.is_alive(),
                        'the other transition ran inside nova\'s fenced '
                        'step: %r; marker changes %s' % (
                            self.errors, self.cinder.history))
        self.cinder.resume.set()
        nova.join(60)
        other.join(60)
        self.assertEqual([], self.errors)

    def test_drain_waits_for_attach_between_marker_and_core(self):
        """A drain started after the marker was set, before the core."""
        nova = self.pause_nova(SET, 'after', self.driver.connect_volume,
                               self.info('att-1'), None)
        self.assertEqual('compute1', self.cinder.fences[WB_VOL])
        self.assertEqual([], self.cores())     # no core yet
        operator = self.in_thread(
            'operator', lifecycle.Lifecycle(casadm.Casadm()).drain,
            self.subject, volume_lifecycle.cinder_view(),
            lifecycle.deadline(20))
        self.assert_waits_then_finishes(nova, operator)
        # consistent: Cinder says drained by att-1 and the core is drained
        [core] = self.cores()
        self.assertEqual(lifecycle.DRAINED,
                         lifecycle.state(casadm.Casadm(), self.spec))
        self.assertIn(core.core_id, self.drained_on('compute1'))
        self.assertEqual(
            {'host': 'compute1', 'epoch': 'att-1', 'drained': True},
            self.cinder._record(WB_VOL))
        self.assertEqual([(SET, 'compute1', 'att-1'),
                          (SET, 'compute1', 'att-1')], self.cinder.history)

    def test_attach_waits_for_detach_between_core_and_clear(self):
        """Another nova thread's attach while the detach clears."""
        self.driver.connect_volume(self.info('att-1'), None)
        [old_core] = self.cores()
        self.host.set_dirty(old_core.cache_id, old_core.core_id, 7)
        nova = self.pause_nova(CLEAR, 'before', self.driver.disconnect_volume,
                               self.info('att-1'), None)
        self.assertEqual([], self.cores())     # flushed and removed
        attach = self.in_thread('attach', self.driver.connect_volume,
                                self.info('att-2'), None)
        self.assert_waits_then_finishes(nova, attach)
        # the detach cleared its own marker, then the attach set a new one
        self.assertEqual([(SET, 'compute1', 'att-1'), (CLEAR, None, None),
                          (SET, 'compute1', 'att-2')], self.cinder.history)
        self.assertEqual(
            {'host': 'compute1', 'epoch': 'att-2', 'drained': False},
            self.cinder._record(WB_VOL))
        [core] = self.cores()
        self.assertEqual(lifecycle.CACHING,
                         lifecycle.state(casadm.Casadm(), self.spec))
        self.assertEqual(set(), self.drained_on('compute1') & {core.core_id})
        self.driver.disconnect_volume(self.info('att-2'), None)
        self.assertEqual({}, self.cinder.fences)
        self.assertEqual(set(), drain_mod.drained_cores(
            casadm.Casadm().list_io_classes(core.cache_id)))
