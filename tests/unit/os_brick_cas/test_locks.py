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

"""The per-volume lock: re-entrant for its holder, exclusive for others."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from os_brick_cas import exception
from os_brick_cas import locks
from os_brick_cas import opts
from os_brick_cas import rbd_names

SPEC = rbd_names.ImageSpec('volumes', '', 'volume-1')

#: another process takes the same lock file for a bounded time
OTHER_PROCESS = textwrap.dedent('''
    import sys
    from oslo_config import cfg
    from os_brick_cas import exception, locks, opts, rbd_names
    opts.register_opts(cfg.CONF)
    cfg.CONF([], project='os-brick-cas-test')
    cfg.CONF.set_override('lock_path', sys.argv[1], group=opts.GROUP)
    spec = rbd_names.ImageSpec('volumes', '', 'volume-1')
    try:
        with locks.volume_lock(spec, float(sys.argv[2])):
            print('took it')
    except exception.LockTimedOut:
        print('timed out')
''')


class VolumeLockTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.lock_path = self.useFixture(fixtures.TempDir()).path
        conf = self.useFixture(config_fixture.Config(cfg.CONF))
        opts.register_opts(cfg.CONF)
        conf.config(group=opts.GROUP, lock_path=self.lock_path,
                    lock_timeout=10)

    def other_thread_takes(self, timeout: float = 0.3) -> bool:
        """Whether another thread gets the lock within *timeout*."""
        result = []

        def take():
            try:
                with locks.volume_lock(SPEC, timeout):
                    result.append(True)
            except exception.LockTimedOut:
                result.append(False)

        thread = threading.Thread(target=take)
        thread.start()
        thread.join(timeout + 10)
        return result == [True]

    def other_process_takes(self, timeout: float = 0.3) -> bool:
        """Whether another process gets the lock file within *timeout*."""
        out = subprocess.run(
            [sys.executable, '-c', OTHER_PROCESS, self.lock_path,
             str(timeout)], capture_output=True, text=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        self.assertEqual(0, out.returncode, out.stderr)
        return out.stdout.strip() == 'took it'

    def test_holder_nests_without_waiting(self):
        # a holder that waited out its own lock would take 5 s; the
        # margin is for a loaded machine (CI runs unit tests beside a
        # TCG guest)
        with locks.volume_lock(SPEC, 5):
            started = time.monotonic()
            with locks.volume_lock(SPEC, 5):
                with locks.volume_lock(SPEC, 0):
                    self.assertTrue(locks.held(
                        locks.volume_lock_name(SPEC)))
            self.assertLess(time.monotonic() - started, 2.5)

    def test_released_only_by_the_outermost_exit(self):
        name = locks.volume_lock_name(SPEC)
        with locks.volume_lock(SPEC):
            with locks.volume_lock(SPEC):
                pass
            # the inner exit released nothing
            self.assertTrue(locks.held(name))
            self.assertFalse(self.other_thread_takes())
            self.assertFalse(self.other_process_takes())
        self.assertFalse(locks.held(name))
        self.assertTrue(self.other_thread_takes())
        self.assertTrue(self.other_process_takes())

    def test_error_in_a_nested_block_keeps_the_outer_hold(self):
        with locks.volume_lock(SPEC):
            with testtools.ExpectedException(RuntimeError):
                with locks.volume_lock(SPEC):
                    raise RuntimeError('inner step failed')
            self.assertFalse(self.other_thread_takes())
        self.assertTrue(self.other_thread_takes())

    def test_other_thread_and_process_excluded_while_held(self):
        with locks.volume_lock(SPEC):
            self.assertFalse(self.other_thread_takes())
            self.assertFalse(self.other_process_takes())

    def test_waiter_times_out_while_another_thread_holds_it(self):
        taken, release = threading.Event(), threading.Event()

        def hold():
            with locks.volume_lock(SPEC):
                taken.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        self.addCleanup(holder.join)
        self.addCleanup(release.set)
        self.assertTrue(taken.wait(30))
        started = time.monotonic()
        self.assertRaises(exception.LockTimedOut,
                          locks.volume_lock(SPEC, 0.5).__enter__)
        waited = time.monotonic() - started
        self.assertGreaterEqual(waited, 0.4)
        self.assertLess(waited, 20)    # not until the holder's 30 s
        # the failed waiter holds nothing afterwards
        self.assertFalse(locks.held(locks.volume_lock_name(SPEC)))

    def test_waiter_times_out_while_another_process_holds_it(self):
        script = textwrap.dedent('''
            import sys, time
            from oslo_config import cfg
            from os_brick_cas import locks, opts, rbd_names
            opts.register_opts(cfg.CONF)
            cfg.CONF([], project='os-brick-cas-test')
            cfg.CONF.set_override('lock_path', sys.argv[1],
                                  group=opts.GROUP)
            with locks.volume_lock(
                    rbd_names.ImageSpec('volumes', '', 'volume-1')):
                print('holding', flush=True)
                sys.stdin.readline()
        ''')
        other = subprocess.Popen(
            [sys.executable, '-c', script, self.lock_path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        self.addCleanup(other.wait, 60)
        self.addCleanup(other.stdin.close)
        self.assertEqual('holding', other.stdout.readline().strip())
        self.assertRaises(exception.LockTimedOut,
                          locks.volume_lock(SPEC, 0.5).__enter__)
        other.stdin.write('\n')
        other.stdin.flush()
        self.assertEqual(0, other.wait(60))
        with locks.volume_lock(SPEC, 5):
            pass
