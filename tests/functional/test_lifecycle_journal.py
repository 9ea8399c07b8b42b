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

"""The life-cycle journal: a crash mid-transition is resolved later."""

import os

import fixtures

from os_brick_cas import lifecycle
from os_brick_cas import rbd_names
from tests.functional import test_lifecycle

HOST = test_lifecycle.HOST
VOL_A = test_lifecycle.VOL_A


class JournalTestCase(test_lifecycle.LifecycleRegressionBase):
    """A crash mid-drain is resolved by the next process."""

    def test_crash_after_telling_cinder_resolves_to_caching(self):
        core = self.attach(VOL_A, dirty=10)

        class Crash(BaseException):
            pass

        def crash(step):
            if step == 'drain:told':
                raise Crash(step)

        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.lifecycle.step_hook', crash))
        self.assertRaises(Crash, self.cli, 'drain', '--volume', VOL_A)
        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.lifecycle.step_hook', None))
        spec = rbd_names.parse_link_name(os.path.basename(core.device))
        self.assertEqual(lifecycle.DRAINING,
                         lifecycle.state(self.casadm, spec))
        self.assertTrue(self.cinder.owner(VOL_A).drained)
        # Cinder unreachable: the resolution keeps it drained
        self.cinder.down = True
        view = lifecycle.Cinder(HOST, self.cinder.client())
        self.assertIn('Cinder', lifecycle.Lifecycle(self.casadm).resolve_all(
            view, lifecycle.deadline(5))[VOL_A])
        self.assert_cinder_no_stronger_than_host(VOL_A)
        self.cinder.down = False
        self.assertEqual({}, lifecycle.Lifecycle(self.casadm).resolve_all(
            view, lifecycle.deadline(5)))
        self.assertFalse(self.pinned(core))
        self.assertFalse(self.cinder.owner(VOL_A).drained)
        self.assertEqual([], list(lifecycle.records()))
