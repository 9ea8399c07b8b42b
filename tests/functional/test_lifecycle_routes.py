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

"""Every caller's transition is checked by the life-cycle table.

The connector's attach, detach and flush, discard, the marker's reclaim
and the re-check of a held drain go through :mod:`os_brick_cas.lifecycle`
under the volume lock; what the table does not allow is refused.
"""

import contextlib
import io
import os

import fixtures

from os_brick_cas.cmd import main as cli
from os_brick_cas import discard
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas import lifecycle
from os_brick_cas import rbd_names
from os_brick_cas import recover
from tests.functional import test_lifecycle

HOST = test_lifecycle.HOST
VOL_A = test_lifecycle.VOL_A


class Crash(BaseException):
    pass


class RoutesTestCase(test_lifecycle.LifecycleRegressionBase):

    def view(self) -> lifecycle.Cinder:
        return lifecycle.Cinder(HOST, self.cinder.client())

    def subject(self, core) -> lifecycle.Volume:
        return lifecycle.Volume(
            rbd_names.parse_link_name(os.path.basename(core.device)), VOL_A)

    def crash_mid_drain(self, core) -> None:
        """A drain whose process stopped after telling Cinder."""

        def crash(step):
            if step == 'drain:told':
                raise Crash(step)

        with fixtures.MonkeyPatch('os_brick_cas.lifecycle.step_hook', crash):
            self.assertRaises(Crash, lifecycle.Lifecycle(self.casadm).drain,
                              self.subject(core), self.view(),
                              lifecycle.deadline(10))
        self.assertEqual(lifecycle.DRAINING, lifecycle.state(
            self.casadm, self.subject(core).spec))

    def props_of(self, volume_id: str) -> dict:
        return self.props('volume-' + volume_id, 'wb', volume_id=volume_id,
                          cas_epoch='att-' + volume_id[-4:])

    def test_connector_refuses_attach_detach_flush_mid_transition(self):
        core = self.attach(VOL_A, dirty=10)
        self.crash_mid_drain(core)
        props = self.props_of(VOL_A)
        for action in (lambda: self.connector.connect_volume(dict(props)),
                       lambda: self.connector.disconnect_volume(
                           dict(props), None),
                       lambda: self.connector.flush_volume(dict(props))):
            error = self.assertRaises(exception.TransitionRefused, action)
            self.assertIn('draining', str(error))
            self.assertIn('os-brick-cas undrain --volume', str(error))
        # nothing changed: the core is there, Cinder's view holds
        self.assertEqual(core.core_id, self.core_of(VOL_A).core_id)
        self.assert_cinder_no_stronger_than_host(VOL_A)
        # resolved, the detach goes on
        self.assertEqual({}, lifecycle.Lifecycle(self.casadm).resolve_all(
            self.view(), lifecycle.deadline(10)))
        self.connector.disconnect_volume(dict(props), None)
        self.assertEqual([], self.cores())

    def test_discard_refused_mid_transition(self):
        core = self.attach(VOL_A, dirty=10)
        self.crash_mid_drain(core)
        outcome = discard.discard(VOL_A, ['att-' + VOL_A[-4:]], True,
                                  self.casadm)
        self.assertFalse(outcome.done)
        self.assertIn('draining', outcome.message)
        self.assertEqual(core.core_id, self.core_of(VOL_A).core_id)

    def test_recover_and_discard_return_their_outcome(self):
        """Issue 32 (6): results, not prints and exit codes."""
        core = self.attach(VOL_A, dirty=10)
        # the marker names another attachment: the data here is not ours
        refused = recover.recover(VOL_A, 'att-other', 'cinder', self.casadm,
                                  self.connector)
        self.assertEqual(False, refused.done)
        self.assertIn('refused', refused.message)
        self.assertEqual(core.core_id, self.core_of(VOL_A).core_id)
        kept = discard.discard(VOL_A, ['att-lost'], True, self.casadm)
        self.assertEqual(False, kept.done)
        self.assertIn('does not record as lost', kept.message)
        done = recover.recover(VOL_A, 'att-' + VOL_A[-4:], 'cinder',
                               self.casadm, self.connector)
        self.assertEqual(True, done.done, done.message)
        self.assertIn('flushed to Ceph and removed', done.message)
        self.assertEqual([], self.cores())

    def test_discard_names_the_core_and_its_instance(self):
        # main: 'core 2 of cache instance 1' for core 1 of instance 2
        core = self.attach(VOL_A, dirty=10)
        self.assertNotEqual(core.core_id, core.cache_id)
        wanted = 'core %d of cache instance %d' % (core.core_id,
                                                   core.cache_id)
        kept = discard.discard(VOL_A, ['att-lost'], True, self.casadm)
        self.assertIn('refused: %s (Active, 10 dirty blocks)' % wanted,
                      kept.message)
        unconfirmed = discard.discard(VOL_A, ['att-' + VOL_A[-4:]], False,
                                      self.casadm)
        self.assertIn('would DROP %s' % wanted, unconfirmed.message)
        self.assertEqual(core.core_id, self.core_of(VOL_A).core_id)

    def test_reclaim_only_of_a_verified_drain(self):
        core = self.attach(VOL_A, dirty=10)
        machine = lifecycle.Lifecycle(self.casadm)
        subject = self.subject(core)
        # caching: not a transition the table allows
        self.assertRaises(exception.TransitionRefused, machine.reclaim,
                          subject, self.view(), lifecycle.deadline(10),
                          'att-x')
        machine.drain(subject, self.view(), lifecycle.deadline(10))
        # a destination took the marker over, then the migration failed
        owner = self.cinder.owner(VOL_A)
        self.cinder.client().set(VOL_A, 'compute-b', 'att-b', expect=owner)
        # someone loads an IO-class table by hand: class 0 only
        self.casadm.load_io_classes(core.cache_id, [
            drain_mod.UNCLASSIFIED])
        error = self.assertRaises(exception.TransitionRefused,
                                  machine.reclaim, subject, self.view(),
                                  lifecycle.deadline(10), 'att-x')
        self.assertIn('caching', str(error))
        self.assertEqual('compute-b', self.cinder.owner(VOL_A).host)
        machine.drain(subject, self.view(), lifecycle.deadline(10))
        self.assertTrue(machine.reclaim(subject, self.view(),
                                        lifecycle.deadline(10), 'att-x'))
        owner = self.cinder.owner(VOL_A)
        self.assertEqual((HOST, True), (owner.host, owner.drained))
        self.assert_cinder_no_stronger_than_host(VOL_A)

    def test_keep_drained_verifies_the_loaded_table(self):
        core = self.attach(VOL_A, dirty=10)
        machine = lifecycle.Lifecycle(self.casadm)
        subject = self.subject(core)
        machine.drain(subject, self.view(), lifecycle.deadline(10),
                      holder=lifecycle.LIVE_MIGRATION, instance='server-1')
        self.assertIsNone(machine.keep_drained(
            subject, self.view(), lifecycle.deadline(10),
            lifecycle.LIVE_MIGRATION, 'server-1'))
        # a table loaded by hand drops the drain class; writes get dirty
        self.casadm.load_io_classes(core.cache_id, [
            drain_mod.UNCLASSIFIED])
        self.host.set_dirty(core.cache_id, core.core_id, 7)
        why = machine.keep_drained(subject, self.view(),
                                   lifecycle.deadline(10),
                                   lifecycle.LIVE_MIGRATION, 'server-1')
        self.assertIn('IO-class table', why)
        self.assertTrue(self.pinned(self.core_of(VOL_A)))
        self.assertEqual(0, self.dirty(self.core_of(VOL_A)))
        self.assertEqual(lifecycle.LIVE_MIGRATION,
                         lifecycle.read_record(subject.spec).holder)
        self.assert_cinder_no_stronger_than_host(VOL_A)

    def test_detach_of_a_drained_core_inactive_after_a_reboot(self):
        """Its drain class goes with it (found by the long stateful run)."""
        core = self.attach(VOL_A, dirty=10)
        lifecycle.Lifecycle(self.casadm).drain(
            self.subject(core), self.view(), lifecycle.deadline(10))
        self.host.reboot()          # clean (drained), now inactive
        self.connector.disconnect_volume(self.props_of(VOL_A), None)
        self.assertEqual([], self.cores())
        self.assertEqual(set(), drain_mod.drained_cores(
            self.casadm.list_io_classes(core.cache_id)))

    def test_cli_flush_refused_mid_transition(self):
        core = self.attach(VOL_A, dirty=10)
        self.crash_mid_drain(core)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = cli.main(['flush', '--volume', VOL_A])
        self.assertEqual(1, code, out.getvalue())
        self.assertIn('draining', out.getvalue())
