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

"""The whole attach/detach through real privsep daemons (we are root).

Other functional tests run privsep entry points in-process; this one starts
``privsep-helper`` for both os-brick's context (rbd map/unmap) and ours
(casadm, /dev links, opencas.conf), the way nova-compute does, so every
argument and result really crosses the daemon boundary.
"""

import os
import sys
import threading
import time

import os_brick.privileged

from os_brick_cas import casadm
from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
import os_brick_cas.privileged
from os_brick_cas.privileged import casadm as priv_casadm
from tests.functional import base


class PrivsepDaemonTestCase(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        config_file = os.path.join(self.tmp, 'daemon.conf')
        with open(config_file, 'w') as conf_file:
            conf_file.write('[os_brick_cas]\nopencas_conf = %s\n'
                            'lock_path = %s\nstate_path = %s\n'
                            'sysfs_rbd_root = %s\n' % (
                                self.opencas_conf, self.tmp, self.tmp,
                                self.host.sysfs_root))
        helper = os.path.join(os.path.dirname(sys.executable),
                              'privsep-helper')
        for context, group in (
                (os_brick_cas.privileged.default, 'privsep_os_brick_cas'),
                (os_brick_cas.privileged.flush, 'privsep_os_brick_cas_flush'),
                (os_brick.privileged.default, 'privsep_osbrick')):
            self.conf.config(group=group, helper_command='%s --config-file %s'
                             % (helper, config_file))
            context.set_client_mode(True)
            self.addCleanup(context.stop)

    def test_write_back_attach_detach_through_daemons(self):
        image = self.image('volume-daemon')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.assertEqual(info['path'], core.exported)
        self.assertTrue(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id, core.device))
        self.assertIsNotNone(os_brick_cas.privileged.default.channel)
        self.host.set_dirty(core.cache_id, core.core_id, 16)
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while flushing core\n'
                                      'Core device not available\n')
        # the typed exception and its advice come back across the daemon
        exc = self.assertRaises(exception.FlushFailed,
                                self.connector.disconnect_volume, props, info)
        self.assertIn('left in place', str(exc))
        self.assertEqual(16, self.dirty(core))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_daemon_refuses_bad_arguments(self):
        exc = self.assertRaises(exception.InvalidInput, priv_casadm.add_core,
                                1, '/dev/sda; reboot', 30)
        self.assertIn('/dev/sda; reboot', str(exc))
        self.assertEqual([], self.host.calls())

    def test_flush_runs_while_hung_calls_fill_the_short_call_workers(self):
        """Hung short calls never take the workers a flush needs."""
        self.conf.config(group='privsep_os_brick_cas', thread_pool_size=2)
        self.conf.config(group='privsep_os_brick_cas_flush',
                         thread_pool_size=1)
        # the hung calls end at their bound (20 s); a flush that waited
        # for their workers ends after it, one that did not well before
        # (6.6 s seen at a load of 6, under 2 s idle)
        self.conf.config(group='os_brick_cas', casadm_timeout=20)
        props = self.props(self.image('volume-workers'), 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 16)
        self.host.inject_fault('list-caches', hang=60, count=2)
        errors: list[Exception] = []

        def hung_list() -> None:
            try:
                casadm.Casadm().list_caches()
            except Exception as exc:
                errors.append(exc)

        hung = [threading.Thread(target=hung_list) for _ in range(2)]
        for thread in hung:
            thread.start()
        time.sleep(1)  # both short-call workers are now stuck in casadm -L
        started = time.monotonic()
        casadm.Casadm().flush(core.cache_id, core.core_id, 30)
        flushed_after = time.monotonic() - started
        self.assertTrue(all(thread.is_alive() for thread in hung))
        for thread in hung:
            thread.join()
        # the flush did not wait for a short-call worker to be freed
        self.assertLess(flushed_after, 15)
        self.assertEqual(0, self.dirty(core))
        self.assertEqual(2, len(errors))
        for exc in errors:
            self.assertIsInstance(exc, exception.CasadmTimedOut)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
