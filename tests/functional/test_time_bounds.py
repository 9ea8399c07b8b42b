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

"""Every casadm and rbd call is time-bounded; a hung one holds nothing.

The stand-ins hang on request the way the real tools do: a hung casadm
call other than a flush ignores SIGINT (only SIGKILL ends it), a hung rbd
call ignores nothing. Each case asserts the typed error, that no stand-in
process is left running, and that the next operation (same or other
volume) is not blocked by a lock the hung call held. The hangs last far
longer than the bounds set here, so a missing bound fails the test (it
would wait out the hang) instead of passing slowly.
"""

import glob
import os
import subprocess
import sys
import tempfile
import time

import ddt

from cas_standin import state as state_mod
from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
from tests.functional import base

#: the bound of every casadm/rbd call here: short, yet a few times what
#: an unhung stand-in call takes on a loaded machine (a 2-s bound failed
#: unhung calls at a load of 6)
BOUND = 6
#: far longer than any bound below
HANG = 120
#: a bounded call returns well before this (bound + kill + grace)
PROMPT = 60

#: os-brick's ceph.conf files with a keyring (mkstemp, so under TMPDIR)
BRICKRBD_FILES = os.path.join(tempfile.gettempdir(), 'brickrbd_*')


def stand_in_pids(state_dir: str) -> list[int]:
    """Stand-in processes of this simulated host still running."""
    marker = ('%s=%s' % (state_mod.ENV, state_dir)).encode()
    pids = []
    for environ in glob.glob('/proc/[0-9]*/environ'):
        try:
            with open(environ, 'rb') as env_file:
                if marker in env_file.read().split(b'\0'):
                    pids.append(int(environ.split('/')[2]))
        except OSError:
            continue
    return pids


@ddt.ddt
class TimeBoundsTestCase(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        self.conf.config(group='os_brick_cas', casadm_timeout=BOUND,
                         rbd_timeout=BOUND, flush_timeout=BOUND,
                         lock_timeout=BOUND + 1)

    def assert_bounded(self, started: float) -> None:
        self.assertLess(time.monotonic() - started, PROMPT)
        self.assertEqual([], stand_in_pids(self.host.state_dir))

    @ddt.data('list-caches', 'add-core')
    def test_hung_casadm_call_in_attach_is_killed(self, verb):
        image = self.image('volume-hung-%s' % verb)
        props = self.props(image, 'wb')
        self.host.inject_fault(verb, hang=HANG)
        started = time.monotonic()
        exc = self.assertRaises(exception.CasadmTimedOut,
                                self.connector.connect_volume, props)
        self.assert_bounded(started)
        self.assertIn('within %d s' % BOUND, str(exc))
        # rolled back, and the volume's lock is free again
        self.assertEqual([], self.mappings())
        self.assertEqual([], self.cores())
        info = self.connector.connect_volume(props)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_hung_list_in_detach_keeps_dirty_data(self):
        image = self.image('volume-hung-detach')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 64)
        self.host.inject_fault('list-caches', hang=HANG)
        started = time.monotonic()
        self.assertRaises(exception.CasadmTimedOut,
                          self.connector.disconnect_volume, props, info)
        self.assert_bounded(started)
        [kept] = self.cores()
        self.assertEqual(64, self.dirty(kept))
        self.assertEqual(1, len(self.mappings()))
        self.assertTrue(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id, core.device))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def assert_hung_detach_keeps_the_core(self, name: str, mode: str,
                                          verb: str) -> None:
        """A detach whose casadm *verb* hangs is bounded and keeps all."""
        image = self.image(name)
        props = self.props(image, mode)
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.inject_fault(verb, hang=HANG)
        started = time.monotonic()
        self.assertRaises(exception.CasadmTimedOut,
                          self.connector.disconnect_volume, props, info)
        self.assert_bounded(started)
        self.assertEqual([(core.cache_id, core.core_id)],
                         [(c.cache_id, c.core_id) for c in self.cores()])
        self.assertEqual(1, len(self.mappings()))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_hung_stats_in_detach_keeps_the_core(self):
        """A clean-mode detach asks casadm for the dirty count first."""
        self.assert_hung_detach_keeps_the_core('volume-hung-stats', 'wt',
                                               'stats')

    def test_hung_removal_is_interrupted_and_keeps_the_core(self):
        """-R flushes first: it is bounded by flush_timeout, SIGINT first."""
        self.assert_hung_detach_keeps_the_core('volume-hung-remove', 'wb',
                                               'remove-core')

    def test_hung_map_is_killed_and_leaves_nothing(self):
        before = set(glob.glob(BRICKRBD_FILES))
        image = self.image('volume-hung-map')
        props = self.props(image, 'wb', keyring='AQBsecretkeyring==')
        self.host.inject_fault('map', hang=HANG)
        started = time.monotonic()
        exc = self.assertRaises(exception.RbdTimedOut,
                                self.connector.connect_volume, props)
        self.assert_bounded(started)
        self.assertIn('rbd map', str(exc))
        self.assertEqual([], self.mappings())
        self.assertEqual(before, set(glob.glob(BRICKRBD_FILES)))
        info = self.connector.connect_volume(props)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_hung_unmap_is_killed_and_retried_by_the_next_detach(self):
        image = self.image('volume-hung-unmap')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        self.host.inject_fault('unmap', hang=HANG)
        started = time.monotonic()
        exc = self.assertRaises(exception.RbdTimedOut,
                                self.connector.disconnect_volume, props, info)
        self.assert_bounded(started)
        self.assertIn('may still be mapped', str(exc))
        # the core went away after its flush; only the mapping is left
        self.assertEqual([], self.cores())
        self.assertEqual(1, len(self.mappings()))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_lock_wait_is_bounded(self):
        """A detach waiting on another process's flush gives up cleanly."""
        image = self.image('volume-lock-wait')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 32)
        holder = subprocess.Popen(
            [sys.executable, '-c',
             'import sys, time\n'
             'from oslo_concurrency import lockutils\n'
             'with lockutils.lock("cache-%d", lock_file_prefix='
             '"os-brick-cas-", external=True, lock_path=sys.argv[1]):\n'
             '    print("held", flush=True)\n'
             '    time.sleep(%d)\n' % (core.cache_id, HANG), self.tmp],
            stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        self.assertEqual('held\n', holder.stdout.readline())
        started = time.monotonic()
        exc = self.assertRaises(exception.LockTimedOut,
                                self.connector.disconnect_volume, props, info)
        self.assertLess(time.monotonic() - started, PROMPT)
        self.assertIn('cache instance %d' % core.cache_id, str(exc))
        self.assertEqual(32, self.dirty(self.cores()[0]))
        self.assertEqual(1, len(self.mappings()))
        holder.kill()
        holder.wait()
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
