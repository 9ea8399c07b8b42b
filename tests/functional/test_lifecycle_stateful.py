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

"""Random interleavings of life-cycle transitions (hypothesis, stateful).

The real code (os_brick_cas.lifecycle, the connector, casadm through the
host simulator, python-cinderclient against a fake Cinder at the HTTP
boundary) is driven through random sequences of: guest writes, drains
and undrains by nova (live migration, snapshot, swap) and by the CLI,
crashes at every journaled step followed by a restart (new objects, the
start-up resolution), Cinder going down and up, another host taking the
marker over at a live migration's switchover, a failing flush, a host
reboot with re-activation, the periodic release, and two transitions
running at once on volumes of one cache instance. After every step:

I1  while Cinder's marker says this host's attachment drained a volume,
    its core holds no dirty data and cannot get any;
I2  no host other than the owner writes the volume's cached data to
    Ceph (this host's dirty count never falls while another owns it);
I3  at the end, after a restart and the periodic release with Cinder up,
    every volume caches again, or says why not;
I4  after detaching, nothing is left behind;
I5  each instance's IO-class table is one os-brick-cas composes, and each
    volume's core has its cache share (``cas:cache_share``): as a capped
    class while it caches, remembered in its drain class while drained.

CI runs a fixed seed and a bounded number of examples; ``tox -e
stateful-long`` (OS_BRICK_CAS_STATEFUL_EXAMPLES, a random seed) runs more.
nova_ext's own marker path (attach, re-attach, detach), Cinder errors and
lost answers, corrupt journal records and cinder_ext's guards are driven
by tests/nova/functional/test_marker_stateful.py (nova cannot be imported
here).
"""

import os
import sys
import threading
from typing import Optional
import uuid

from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import settings
from hypothesis import stateful
from hypothesis import strategies as st

from os_brick_cas import casadm
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import io_class_table
from os_brick_cas import lifecycle
from os_brick_cas.simulator import state as sim_state
from os_brick_cas import volume as volume_mod
from tests.functional import base
from tests.functional import fake_cinder

HOST = 'compute-a'
OTHER = 'compute-b'
VOLUMES = 2
#: each volume's cache share (whole percent of the wb instance)
SHARES = (30, 20)
#: steps hypothesis may crash the process at
CRASH_POINTS = ('drain:journaled', 'drain:flushed', 'drain:telling',
                'drain:told', 'undrain:journaled', 'undrain:told',
                'undrain:unpinned')
NOVA_HOLDERS = (lifecycle.LIVE_MIGRATION, lifecycle.SNAPSHOT,
                lifecycle.SWAP)


class Crash(BaseException):
    """The process died at a journaled step.

    Not an Exception: nothing in the product may catch it.
    """


def _examples(default: int) -> int:
    return int(os.environ.get('OS_BRICK_CAS_STATEFUL_EXAMPLES', default))


def _long_run() -> bool:
    return 'OS_BRICK_CAS_STATEFUL_EXAMPLES' in os.environ


#: steps run over all examples, checked by the invariants (reported by
#: the long run)
STEPS = [0]


def machine_for(test: 'LifecycleStatefulTestCase'):

    class LifecycleMachine(stateful.RuleBasedStateMachine):

        def __init__(self):
            super().__init__()
            self.cinder = fake_cinder.FakeCinder()
            self.casadm = casadm.Casadm()
            self.credentials = True
            self.volumes = []
            for index in range(VOLUMES):
                # by-id links live in the machine's one /dev/disk/by-id:
                # names no other run (another worktree's) uses
                volume_id = str(uuid.uuid4())
                name = 'volume-' + volume_id
                epoch = 'att-' + volume_id[:8]
                props = test.props(test.image(name), 'wb',
                                   volume_id=volume_id, cas_epoch=epoch,
                                   cache_share=SHARES[index])
                test.connector.connect_volume(props)
                # what nova's connect does: this host owns the volume
                self.cinder.markers[volume_id] = {
                    'host': HOST, 'epoch': epoch, 'drained': False}
                self.volumes.append((props, volume_id, epoch))
            self.restart()

        # -- the world ----------------------------------------------------
        def view(self) -> lifecycle.Cinder:
            if not self.credentials:
                return lifecycle.Cinder(HOST, None, problem='no credentials')
            return lifecycle.Cinder(HOST, self.cinder.client())

        def restart(self) -> None:
            """A new nova-compute/CLI process: new objects, resolution."""
            self.machine = lifecycle.Lifecycle(casadm.Casadm())
            self.machine.resolve_all(self.view(), lifecycle.deadline(20))

        def subject(self, index: int) -> lifecycle.Volume:
            props, volume_id, _epoch = self.volumes[index]
            return lifecycle.Volume(
                volume_mod.from_connection_properties(props).spec,
                volume_id)

        def core(self, index: int) -> Optional[casadm.Core]:
            found = lifecycle.locate(self.casadm, self.subject(index).spec)
            return found.core if found else None

        def attempt(self, action, *args, crash_at: Optional[str] = None,
                    **kwargs) -> None:
            """Run a transition; refusals are fine, a crash restarts."""

            def hook(step):
                if step == crash_at:
                    raise Crash(step)

            lifecycle.step_hook = hook if crash_at else None
            try:
                action(*args, **kwargs)
            except Crash:
                lifecycle.step_hook = None
                self.restart()
            except exception.CasError:
                pass
            finally:
                lifecycle.step_hook = None

        @staticmethod
        def sim_dirty(core: casadm.Core) -> int:
            """Dirty blocks of *core*, inactive ones too (the stand-in)."""
            return test.host.state()['caches'][str(core.cache_id)][
                'cores'][str(core.core_id)]['dirty']

        def snapshot_dirty(self) -> dict[int, int]:
            dirty = {}
            for index in range(VOLUMES):
                core = self.core(index)
                dirty[index] = (self.casadm.dirty_blocks(core)
                                if core is not None and core.active else 0)
            return dirty

        # -- rules ----------------------------------------------------------
        volume = st.integers(min_value=0, max_value=VOLUMES - 1)
        crash = st.one_of(st.none(), st.sampled_from(CRASH_POINTS))

        @stateful.rule(index=volume, blocks=st.integers(1, 50))
        def guest_writes(self, index, blocks):
            owner = self.cinder.owner(self.volumes[index][1])
            if owner is not None and owner.host != HOST:
                return      # the guest runs on the other host now
            core = self.core(index)
            if core is None or not core.active:
                return
            if core.core_id in drain_mod.drained_cores(
                    self.casadm.list_io_classes(core.cache_id)):
                return      # straight to Ceph: a drained core gets none
            test.host.set_dirty(core.cache_id, core.core_id,
                                self.casadm.dirty_blocks(core) + blocks)

        @stateful.rule(index=volume, holder=st.sampled_from(
            (lifecycle.OPERATOR,) + NOVA_HOLDERS), crash_at=crash)
        def drain(self, index, holder, crash_at):
            self.attempt(self.machine.drain, self.subject(index),
                         self.view(), lifecycle.deadline(10), holder=holder,
                         instance='server-1', crash_at=crash_at)

        @stateful.rule(index=volume, holder=st.sampled_from(
            (None,) + NOVA_HOLDERS), retake=st.booleans(), crash_at=crash)
        def undrain(self, index, holder, retake, crash_at):
            self.attempt(self.machine.undrain, self.subject(index),
                         self.view(), lifecycle.deadline(10), retake=retake,
                         holder=holder, crash_at=crash_at)

        @stateful.rule(down=st.booleans())
        def cinder_reachable(self, down):
            self.cinder.down = down

        @stateful.rule(credentials=st.booleans())
        def cli_credentials(self, credentials):
            self.credentials = credentials

        @stateful.rule()
        def restart_process(self):
            self.attempt(self.restart)

        @stateful.rule()
        def flush_fails_once(self):
            test.host.inject_fault('flush-core', exit_code=1,
                                   stderr='Error while writing to core '
                                          'device\n')

        @stateful.rule(index=volume)
        def switchover_to_other_host(self, index):
            """A live migration's destination attaches.

            It takes a drained marker over (compare-and-swap, as
            nova_ext's connect does).
            """
            _props, volume_id, epoch = self.volumes[index]
            owner = self.cinder.owner(volume_id)
            if self.cinder.down or owner is None or not owner.drained:
                return
            self.cinder.client().set(volume_id, OTHER, 'att-other',
                                     expect=owner)

        @stateful.rule(index=volume)
        def other_host_detaches(self, index):
            """The destination detaches cleanly and clears its marker."""
            _props, volume_id, _epoch = self.volumes[index]
            owner = self.cinder.owner(volume_id)
            if self.cinder.down or owner is None or owner.host != OTHER:
                return
            self.cinder.client().clear(volume_id, expect=owner)

        @stateful.rule()
        def host_reboots(self):
            test.host.reboot()
            self.restart_after_reboot()

        def restart_after_reboot(self):
            self.attempt(self.restart)
            for props, volume_id, _epoch in self.volumes:
                owner = self.cinder.owner(volume_id)
                if owner is not None and owner.host != HOST:
                    continue    # nova attaches it elsewhere now
                self.attempt(test.connector.connect_volume, dict(props))

        @stateful.rule(first=volume, second=volume,
                       undrain_second=st.booleans())
        def two_at_once(self, first, second, undrain_second):
            """nova and the CLI at the same time, one cache instance."""
            errors = []

            def run(action, *args, **kwargs):
                try:
                    action(*args, **kwargs)
                except exception.CasError:
                    pass
                except Exception as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=run, args=(
                self.machine.drain, self.subject(first), self.view(),
                lifecycle.deadline(10)), kwargs={
                    'holder': lifecycle.LIVE_MIGRATION})]
            if undrain_second:
                threads.append(threading.Thread(target=run, args=(
                    lifecycle.Lifecycle(casadm.Casadm()).undrain,
                    self.subject(second), self.view(),
                    lifecycle.deadline(10))))
            else:
                threads.append(threading.Thread(target=run, args=(
                    lifecycle.Lifecycle(casadm.Casadm()).drain,
                    self.subject(second), self.view(),
                    lifecycle.deadline(10))))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not errors, errors

        @stateful.rule()
        def periodic_release(self):
            """nova's periodic task: the operations all ended here."""
            for record in self.machine.held():
                self.attempt(self.machine.undrain,
                             lifecycle.Volume(record.spec,
                                              record.volume_id),
                             self.view(), lifecycle.deadline(10),
                             retake=False, holder=record.holder)

        # -- invariants -------------------------------------------------------
        @stateful.invariant()
        def i1_drained_in_cinder_means_drained_here(self):
            STEPS[0] += 1       # invariants run after every step
            for index, (_props, volume_id, epoch) in enumerate(
                    self.volumes):
                owner = self.cinder.owner(volume_id)
                if owner is None or not owner.drained or owner.host != HOST:
                    continue
                core = self.core(index)
                if core is None:
                    continue
                dirty = self.sim_dirty(core)
                assert dirty == 0, (
                    'I1: Cinder says %s drained, its core holds %d dirty '
                    'blocks' % (volume_id, dirty))
                if core.active:
                    table = self.casadm.list_io_classes(core.cache_id)
                    assert core.core_id in drain_mod.drained_cores(table), (
                        'I1: Cinder says %s drained, its core can get dirty '
                        '(no drain class)' % volume_id)

        @stateful.invariant()
        def i2_only_the_owner_writes_to_ceph(self):
            now = self.snapshot_dirty()
            before = getattr(self, '_dirty', now)
            for index, (_props, volume_id, _epoch) in enumerate(
                    self.volumes):
                owner = self.cinder.owner(volume_id)
                if owner is not None and owner.host != HOST:
                    assert now[index] >= before[index], (
                        'I2: %s wrote %d blocks of %s to Ceph while %s owns '
                        'it' % (HOST, before[index] - now[index], volume_id,
                                owner.host))
            self._dirty = now
            assert test.host.state()['dropped_dirty_blocks'] == 0

        @stateful.invariant()
        def i5_each_core_has_its_share(self):
            tables = {}
            for index in range(VOLUMES):
                core = self.core(index)
                if core is None:
                    continue
                if core.cache_id not in tables:
                    tables[core.cache_id] = self.casadm.list_io_classes(
                        core.cache_id)
                    assert io_class_table.is_composed(
                        tables[core.cache_id]), tables[core.cache_id]
                entries = {entry.core_id: entry for entry in
                           io_class_table.entries(tables[core.cache_id])}
                entry = entries.get(core.core_id)
                assert entry is not None and entry.share == SHARES[index], (
                    'I5: volume %d (%s) should have a %d%% share, its '
                    'table gives %s' % (index, core.label, SHARES[index],
                                        entry))

        def teardown(self):
            lifecycle.step_hook = None
            try:
                self.settle()
            finally:
                for props, volume_id, _epoch in self.volumes:
                    test.cleanup_volume(props)
            if _long_run():
                print('stateful life-cycle run: %d steps so far' % STEPS[0],
                      file=sys.stderr, flush=True)

        def settle(self):
            """I3 then I4.

            Everything ends caching (or says why), then detaches without
            leaving anything.
            """
            self.cinder.down = False
            self.credentials = True
            with sim_state.locked(test.host.state_dir) as sim:
                sim['faults'] = []
            if any(core.status == 'Inactive' for core in test.cores()):
                self.restart_after_reboot()
            self.restart()
            self.periodic_release()
            for index, (props, volume_id, epoch) in enumerate(self.volumes):
                owner = self.cinder.owner(volume_id)
                if owner is not None and owner.host != HOST:
                    # I3, "why not": the other host owns it. Its core here
                    # holds nothing and caches nothing (drained, or
                    # inactive after a reboot: doctor names it)
                    core = self.core(index)
                    if core is not None:
                        assert self.sim_dirty(core) == 0
                        assert lifecycle.state(
                            self.casadm, self.subject(index).spec) in (
                                lifecycle.DRAINED, lifecycle.INACTIVE)
                    continue
                # an operator's drain: the admin undrains it
                self.machine.undrain(self.subject(index), self.view(),
                                     lifecycle.deadline(10))
                state = lifecycle.state(self.casadm,
                                        self.subject(index).spec)
                assert state == lifecycle.CACHING, (
                    'I3: %s is %s after the restart and release'
                    % (volume_id, state))
                assert self.cinder.owner(volume_id) == fence.Owner(
                    HOST, epoch, False), self.cinder.owner(volume_id)
            for props, volume_id, epoch in self.volumes:
                owner = self.cinder.owner(volume_id)
                data = dict(props)
                if owner is not None and owner.host != HOST:
                    data['cas_owner_epoch'] = ''
                test.connector.disconnect_volume(data, None)
            assert list(lifecycle.records()) == [], list(lifecycle.records())
            test.assert_clean_host()
            for cache in test.cache_list():
                table = self.casadm.list_io_classes(cache.cache_id)
                assert drain_mod.drained_cores(table) == set(), table

    return LifecycleMachine


class LifecycleStatefulTestCase(base.FunctionalTestCase):

    caches = {1: 'wt', 2: 'wb'}

    def test_random_interleavings_keep_cinder_no_stronger_than_host(self):
        machine = machine_for(self)
        machine.TestCase.settings = settings(
            max_examples=_examples(6),
            stateful_step_count=int(os.environ.get(
                'OS_BRICK_CAS_STATEFUL_STEPS', 20)),
            derandomize=not _long_run(), deadline=None, database=None,
            # shrinking re-runs whole examples on a simulated host: minutes
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck))
        STEPS[0] = 0
        stateful.run_state_machine_as_test(machine)
        if _long_run():
            print('stateful life-cycle run: %d steps' % STEPS[0])
