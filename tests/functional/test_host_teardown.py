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

"""``os-brick-cas host stop|forget`` against the simulated host.

What devstack's unstack and clean run: the simulator's casadm -F/-T and
--check-cache-device stand in for Open CAS; the flush bound, the refusals
and the opencas.conf rows are the real code's.
"""

import contextlib
import io
import os

from os_brick_cas.cmd import main as cli
from tests.functional import base

#: the layout of two of the simulated host's running instances
LAYOUT = """instances:
  - {id: 1, mode: wt, device: /dev/disk/by-id/nvme-sim-part1}
  - {id: 2, mode: wb, device: /dev/disk/by-id/nvme-sim-part2}
"""
FLUSH_FAILS = 'Error while flushing cache 2\nCache flush failed\n'


class HostTeardownTestCase(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        self.layout = os.path.join(self.tmp, 'host-layout.yaml')
        with open(self.layout, 'w') as out:
            out.write(LAYOUT)
        self.conf.config(group='os_brick_cas', host_layout=self.layout)
        # the cache devices as a host has them (forget checks what exists)
        os.makedirs('/dev/disk/by-id', exist_ok=True)
        for cache_id in (1, 2):
            device = '/dev/disk/by-id/nvme-sim-part%d' % cache_id
            if not os.path.exists(device):
                open(device, 'w').close()
                self.addCleanup(os.unlink, device)

    def host_cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(['host'] + list(argv))
        return code, out.getvalue(), err.getvalue()

    def read_conf(self) -> str:
        with open(self.opencas_conf) as conf_file:
            return conf_file.read()

    def conf_ids(self, section: str) -> set[int]:
        rows = self.read_conf().split('[%s]\n' % section, 1)[1]
        rows = rows.split('\n[', 1)[0]
        return {int(line.split()[0]) for line in rows.splitlines()
                if line.strip()}

    def dirty_wb_volume(self, blocks: int = 300) -> tuple[dict, int]:
        props = self.props(self.image('dirty'), 'wb')
        self.connector.connect_volume(props)
        core = next(c for c in self.cores() if c.cache_id == 2)
        self.host.set_dirty(2, core.core_id, blocks)
        return props, core.core_id

    def assert_never_dropped_data(self) -> None:
        for argv in self.casadm_argvs():
            self.assertFalse({'-n', '--no-data-flush', '-f', '--force'} &
                             set(argv), argv)

    def test_stop_flushes_wb_stops_both_and_drops_their_rows(self):
        _, core_id = self.dirty_wb_volume()
        self.assertIn(2, self.conf_ids('cores'))
        code, out, err = self.host_cli('stop', '--with-cores')
        self.assertEqual(0, code, err)
        self.assertIn('cache instance 1 (wt): stopped\n', out)
        self.assertIn('cache instance 2 (wb): stopped\n', out)
        running = {cache.cache_id for cache in self.cache_list()}
        self.assertEqual({3, 4, 5}, running)     # not in the layout: left
        self.assertEqual({3, 4, 5}, self.conf_ids('caches'))
        self.assertEqual(set(), self.conf_ids('cores') & {1, 2})
        argvs = self.casadm_argvs()
        flush = ['casadm', '--flush-cache', '--cache-id', '2']
        stop = ['casadm', '--stop-cache', '--cache-id', '2']
        self.assertLess(argvs.index(flush), argvs.index(stop))
        # a wt instance holds no dirty data: stopped without a flush first
        self.assertNotIn(['casadm', '--flush-cache', '--cache-id', '1'],
                         argvs)
        self.assert_never_dropped_data()

        # again: nothing runs, nothing to do, still success
        code, out, err = self.host_cli('stop')
        self.assertEqual(0, code, err)
        self.assertIn('cache instance 2 (wb): not-running', out)

    def test_an_instance_with_cores_is_kept_untouched_without_with_cores(
            self):
        # a volume attached to a server that is shut off: nothing holds
        # its core open, and stopping would take it away from the server
        _, core_id = self.dirty_wb_volume(300)
        before = self.read_conf()
        code, out, err = self.host_cli('stop')
        self.assertEqual(2, code, err)
        self.assertIn('REFUSED cache instance 2 (wb): kept: 1 core(s) still '
                      'on it: core %d of cache instance 2 (' % core_id, err)
        self.assertIn('"os-brick-cas host stop --with-cores"', err)
        self.assertIn('Nothing was flushed or stopped.', err)
        self.assertIn('cache instance 1 (wt): stopped', out)
        # instance 2 runs on with its core, its dirty data and its rows:
        # not even flushed
        core = next(c for c in self.cores() if c.cache_id == 2)
        self.assertEqual((core_id, 300), (core.core_id, self.dirty(core)))
        argvs = self.casadm_argvs()
        self.assertNotIn(['casadm', '--flush-cache', '--cache-id', '2'],
                         argvs)
        self.assertNotIn(['casadm', '--stop-cache', '--cache-id', '2'],
                         argvs)
        self.assertIn(2, self.conf_ids('caches'))
        self.assertIn(2, self.conf_ids('cores'))
        self.assertNotEqual(before, self.read_conf())   # 1's rows went

    def test_dirty_wb_instance_whose_flush_fails_is_kept_with_its_data(self):
        _, core_id = self.dirty_wb_volume(300)
        before = self.read_conf()
        self.host.inject_fault('flush-cache', exit_code=1, stderr=FLUSH_FAILS)
        code, out, err = self.host_cli('stop', '--with-cores')
        self.assertEqual(2, code, err)
        self.assertIn('REFUSED cache instance 2 (wb): kept: flushing it '
                      'failed', err)
        self.assertIn('run "os-brick-cas flush --all" (or "casadm '
                      '--flush-cache --cache-id 2") until it succeeds, then '
                      'run "os-brick-cas host stop" again', err)
        self.assertIn('Never stop it with --no-data-flush', err)
        # still running, its data still dirty in the cache, still listed
        self.assertIn(2, {c.cache_id for c in self.cache_list()})
        core = next(c for c in self.cores() if c.cache_id == 2)
        self.assertEqual(300, self.dirty(core))
        self.assertNotIn(['casadm', '--stop-cache', '--cache-id', '2'],
                         self.casadm_argvs())
        self.assertIn(2, self.conf_ids('caches'))
        self.assertIn(2, self.conf_ids('cores'))
        # the clean instance beside it was stopped and forgotten
        self.assertNotIn(1, {c.cache_id for c in self.cache_list()})
        self.assertNotIn(1, self.conf_ids('caches'))
        self.assertNotEqual(before, self.read_conf())
        self.assert_never_dropped_data()

        # forget refuses the instance that still runs
        code, out, err = self.host_cli('forget')
        self.assertEqual(2, code)
        self.assertIn('cache instance 2 (wb): kept: it still runs', err)
        self.assertIn('Run "os-brick-cas host stop" first', err)
        self.assertIn(2, self.conf_ids('caches'))

    def test_a_flush_past_the_bound_is_interrupted_and_kept(self):
        self.dirty_wb_volume(300)
        self.host.inject_fault('flush-cache', hang=30)
        code, out, err = self.host_cli('stop', '--with-cores',
                                       '--flush-timeout', '1')
        self.assertEqual(2, code, err)
        self.assertIn('cache instance 2 (wb): kept: flushing it failed '
                      '(Flushing all cores of cache instance 2 did not '
                      'finish within 1 s', err)
        self.assertIn(2, {c.cache_id for c in self.cache_list()})
        self.assertIn(2, self.conf_ids('caches'))
        self.assert_never_dropped_data()

    def test_forget_keeps_a_device_stopped_with_dirty_metadata(self):
        # instance 2 on the layout's by-id name (the simulator keeps a
        # stopped cache's metadata under the name it was started with)
        self._tool('casadm', '-T', '-i', '2')
        self._tool('casadm', '-S', '-i', '2', '-d',
                   '/dev/disk/by-id/nvme-sim-part2', '-c', 'wb')
        _, core_id = self.dirty_wb_volume(300)
        # a stop that dropped the flush (as a crash or -T -n would)
        self._tool('casadm', '-T', '-i', '2', '-n')
        self._tool('casadm', '-T', '-i', '1')
        code, out, err = self.host_cli('forget', '-f', 'value', '-c',
                                       'cache_id', '-c', 'result')
        self.assertEqual(2, code, out + err)
        self.assertEqual('1 forgotten\n2 kept\n', out)
        self.assertIn('/dev/disk/by-id/nvme-sim-part2 holds Open CAS '
                      'metadata with dirty data', err)
        self.assertIn('"os-brick-cas host apply --load-existing"', err)
        self.assertEqual({2, 3, 4, 5}, self.conf_ids('caches'))
        self.assertIn(2, self.conf_ids('cores'))

    def test_forget_after_a_clean_stop_drops_every_row_of_the_layout(self):
        self.dirty_wb_volume(300)
        code, _, err = self.host_cli('stop', '--with-cores')
        self.assertEqual(0, code, err)
        # stop dropped the rows already; an operator put one back by hand
        with open(self.opencas_conf) as conf_file:
            text = conf_file.read()
        with open(self.opencas_conf, 'w') as conf_file:
            conf_file.write(text.replace(
                '[caches]\n',
                '[caches]\n2\t/dev/disk/by-id/nvme-sim-part2\tWB\n'))
        self.assertIn(2, self.conf_ids('caches'))
        code, out, err = self.host_cli('forget')
        self.assertEqual(0, code, err)
        self.assertIn('cache instance 2 (wb): forgotten', out)
        self.assertEqual({3, 4, 5}, self.conf_ids('caches'))
