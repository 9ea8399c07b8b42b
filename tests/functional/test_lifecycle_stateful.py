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
reboot with re-activation (also with an older IO-class table in the cache
metadata), the periodic release, two transitions running at once on
volumes of one cache instance, nova's detach and attach again (with the
share a retype may have changed meanwhile), and a live migration's
source disconnect and a migration back here (the other host drained,
this host's attach takes the marker over). After every step:

I1  while Cinder's marker says this host's attachment drained a volume,
    its core holds no dirty data and cannot get any;
I2  no host other than the owner writes the volume's cached data to
    Ceph (this host's dirty count never falls while another owns it);
I3  at the end, after a restart and the periodic release with Cinder up,
    every volume caches again, or says why not;
I4  after detaching, nothing is left behind;
I5  each instance's IO-class table is one os-brick-cas composes, names
    only cores the instance lists, and each volume's core has its cache
    share (``cas:cache_share``, as its last attach asked): as a capped
    class while it caches, remembered in its drain class while drained;
    a core here of a volume another host owns has no capped class.

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

from cas_standin import state as sim_state
from os_brick_cas import casadm
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import io_class_table
from os_brick_cas import lifecycle
from os_brick_cas.opencas import casadm_output
from os_brick_cas import volume as volume_mod
from tests.functional import base
from tests.functional import fake_cinder

HOST = 'compute-a'
OTHER = 'compute-b'
VOLUMES = 2
#: each volume's cache share at the start (whole percent of the wb
#: instance)
SHARES = (30, 20)
#: shares a volume's type may have at a later attach (None: no share)
LATER_SHARES = (None, 10, 25, 40)
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


def props_index(volumes: list, volume_id: str) -> int:
    """The index of *volume_id* in the machine's volumes."""
    return [entry[1] for entry in volumes].index(volume_id)


def machine_for(test: 'LifecycleStatefulTestCase'):

    class LifecycleMachine(stateful.RuleBasedStateMachine):

        def __init__(self):
            super().__init__()
            self.cinder = fake_cinder.FakeCinder()
            self.casadm = casadm.Casadm()
            self.credentials = True
            self.volumes = []
            #: the share each volume's last attach asked for
            self.shares = list(SHARES)
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

        def core(self, index: int) -> Optional[casadm_output.Core]:
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
        def sim_dirty(core: casadm_output.Core) -> int:
            """Dirty blocks of *core*, inactive ones too (the stand-in)."""
            return test.host.state()['caches'][str(core.cache_id)][
                'cores'][str(core.core_id)]['dirty']

        def snapshot_dirty(self, cores) -> dict[int, int]:
            """Dirty blocks of each volume's core as casadm reports them."""
            return {index: (self.casadm.dirty_blocks(core)
                            if core is not None and core.active else 0)
                    for index, core in cores.items()}

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
                if self.core(props_index(self.volumes, volume_id)) is None:
                    continue    # not attached here
                self.attempt(test.connector.connect_volume, dict(props))

        @stateful.rule(stale=st.booleans(), ghost=st.booleans())
        def host_reboots_with_an_older_table(self, stale, ghost):
            """The metadata's table is older than the last change.

            Its shares are not the ones attached (*stale*), it has a class
            of a core that is gone and a class 0 that does not get what
            the shares leave (*ghost*). Drains are as they were (a drain's
            table is verified before Cinder is told). The loader
            re-activates cores; nova's attaches re-compose the table.
            """
            here = [index for index, (_p, volume_id, _e) in enumerate(
                self.volumes) if self.core(index) is not None and (
                    self.cinder.owner(volume_id) is None or
                    self.cinder.owner(volume_id).host == HOST)]
            # the attaches after the reboot must run: nothing in flight
            attached_here = bool(here) and not self.cinder.down and all(
                lifecycle.state(self.casadm, self.subject(index).spec) in (
                    lifecycle.CACHING, lifecycle.DRAINED) for index in here)
            test.host.reboot()
            for cache in self.casadm.list_caches():
                table = self.casadm.list_io_classes(cache.cache_id)
                older = [io_class_table.Entry(
                    entry.core_id, 5 if stale and entry.share else
                    entry.share, entry.drained)
                    for entry in io_class_table.entries(table)]
                if ghost and attached_here and cache.cores:
                    older.append(io_class_table.Entry(
                        max(core.core_id for core in cache.cores) + 7, 15))
                loaded = io_class_table.compose(older).table
                if ghost and attached_here and len(loaded) > 1:
                    loaded[0] = casadm_output.IoClass(
                        0, io_class_table.UNCLASSIFIED,
                        io_class_table.UNCLASSIFIED_PRIORITY, 1.0)
                self.casadm.load_io_classes(cache.cache_id, loaded)
            self.restart_after_reboot()

        @stateful.rule(index=volume, share=st.sampled_from(LATER_SHARES))
        def nova_detaches_and_attaches_again(self, index, share):
            """A detach, then an attach (a new attachment) here.

            The volume's type may have changed its share meanwhile (a
            share-only retype is done in place; the host applies it at
            the next attach). The marker as nova_ext writes it: cleared
            after the detach, set before the attach.
            """
            props, volume_id, _epoch = self.volumes[index]
            owner = self.cinder.owner(volume_id)
            if self.cinder.down or owner is None or owner.host != HOST:
                return
            try:
                test.connector.disconnect_volume(dict(props), None)
            except exception.CasError:
                return      # refused or the flush failed: still attached
            self.cinder.client().clear(volume_id, expect=owner)
            self.attach_here(index, share, expect=None)

        @stateful.rule(index=volume)
        def source_disconnects_after_switchover(self, index):
            """post_live_migration at the source (here): its core goes."""
            props, volume_id, _epoch = self.volumes[index]
            owner = self.cinder.owner(volume_id)
            if owner is None or owner.host != OTHER or \
                    self.core(index) is None:
                return
            self.attempt(test.connector.disconnect_volume,
                         dict(props, cas_owner_epoch=''), None)

        @stateful.rule(index=volume, share=st.sampled_from(LATER_SHARES))
        def migrates_back_here(self, index, share):
            """A live migration from the other host to this one.

            The other host drained the volume (its marker says so); this
            host's pre_live_migration attach takes the marker over by
            compare-and-swap and places the volume's share.
            """
            _props, volume_id, _epoch = self.volumes[index]
            owner = self.cinder.owner(volume_id)
            if self.cinder.down or owner is None or owner.host != OTHER \
                    or self.core(index) is not None:
                return
            drained = fence.Owner(OTHER, owner.epoch, True)
            if not owner.drained:
                self.cinder.client().set(volume_id, OTHER, owner.epoch,
                                         drained=True, expect=owner)
            self.attach_here(index, share, expect=drained)

        def attach_here(self, index: int, share: Optional[int],
                        expect) -> None:
            """nova's attach here: a new attachment, marker first."""
            props, volume_id, _epoch = self.volumes[index]
            epoch = 'att-' + str(uuid.uuid4())[:8]
            props = dict(props, cas_epoch=epoch)
            props.pop('cache_share', None)
            if share is not None:
                props['cache_share'] = share
            self.cinder.client().set(volume_id, HOST, epoch, expect=expect)
            self.volumes[index] = (props, volume_id, epoch)
            self.shares[index] = share
            test.connector.connect_volume(dict(props))

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
        def host_agrees_with_cinder(self):
            """I1, I2 and I5 on one reading of the host after each step.

            (A casadm listing and each instance's table once per step, not
            once per check and volume: most of this test's time was the
            stand-in's casadm answering the same question again.)
            """
            STEPS[0] += 1       # invariants run after every step
            caches = self.casadm.list_caches()
            tables = {cache.cache_id: self.casadm.list_io_classes(
                cache.cache_id) for cache in caches}
            cores = {}
            for index in range(len(self.volumes)):
                found = lifecycle.locate(
                    self.casadm, self.subject(index).spec, caches)
                cores[index] = found.core if found else None
            self.i1_drained_in_cinder_means_drained_here(cores, tables)
            self.i2_only_the_owner_writes_to_ceph(cores)
            self.i5_each_core_has_its_share(caches, cores, tables)

        def i1_drained_in_cinder_means_drained_here(self, cores, tables):
            for index, (_props, volume_id, epoch) in enumerate(
                    self.volumes):
                owner = self.cinder.owner(volume_id)
                if owner is None or not owner.drained or owner.host != HOST:
                    continue
                core = cores[index]
                if core is None:
                    continue
                dirty = self.sim_dirty(core)
                assert dirty == 0, (
                    'I1: Cinder says %s drained, its core holds %d dirty '
                    'blocks' % (volume_id, dirty))
                if core.active:
                    table = tables[core.cache_id]
                    assert core.core_id in drain_mod.drained_cores(table), (
                        'I1: Cinder says %s drained, its core can get dirty '
                        '(no drain class)' % volume_id)

        def i2_only_the_owner_writes_to_ceph(self, cores):
            now = self.snapshot_dirty(cores)
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

        def i5_each_core_has_its_share(self, caches, cores, tables):
            for cache in caches:
                table = tables[cache.cache_id]
                assert io_class_table.is_composed(table), table
                listed = {core.core_id for core in cache.cores}
                named = {entry.core_id
                         for entry in io_class_table.entries(table)}
                assert named <= listed, (
                    'I5: instance %d has classes of cores it does not list '
                    '(%s)' % (cache.cache_id, sorted(named - listed)))
            for index, (_props, volume_id, _epoch) in enumerate(
                    self.volumes):
                core = cores[index]
                if core is None:
                    continue
                entries = {entry.core_id: entry for entry in
                           io_class_table.entries(tables[core.cache_id])}
                entry = entries.get(core.core_id)
                owner = self.cinder.owner(volume_id)
                if owner is not None and owner.host != HOST:
                    # the other host caches it: no cap here (a drained or
                    # inactive core; its remembered share does not count)
                    assert entry is None or entry.drained, (
                        'I5: %s has a capped class here while %s owns '
                        'volume %d' % (core.label, owner.host, index))
                    continue
                share = self.shares[index]
                if share is None:
                    assert entry is None or (
                        entry.drained and entry.share is None), (
                        'I5: volume %d (%s) has no share, its table gives '
                        '%s' % (index, core.label, entry))
                    continue
                assert entry is not None and entry.share == share, (
                    'I5: volume %d (%s) should have a %d%% share, its '
                    'table gives %s' % (index, core.label, share, entry))

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
            for index, (_props, volume_id, _epoch) in enumerate(
                    self.volumes):
                owner = self.cinder.owner(volume_id)
                if self.core(index) is None and (
                        owner is None or owner.host == HOST):
                    # detached here, no other host has it: nova attaches
                    self.attach_here(index, self.shares[index], owner)
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
