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

"""The operator CLI against the simulated host: status, doctor, flush, bench.

The commands run through ``os_brick_cas.cmd.main.main`` with real argv and
the real casadm layer; the simulator's stand-ins answer below.
"""

import contextlib
import io
import json
import os
import subprocess
from unittest import mock
import uuid

from os_brick_cas.cmd import main as cli
from tests.functional import base

VOL_WT = str(uuid.UUID(int=0xc11))
VOL_WB = str(uuid.UUID(int=0xc12))


class CliTestCase(base.FunctionalTestCase):

    caches = {1: 'wt', 2: 'wb'}

    def cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(argv))
        return code, out.getvalue(), err.getvalue()

    def attach(self, volume_id: str, mode: str) -> dict:
        image = self.image('volume-' + volume_id)
        props = self.props(image, mode, volume_id=volume_id)
        info = self.connector.connect_volume(props)
        self.addCleanup(self._detach_quietly, props)
        return info

    def _detach_quietly(self, props: dict) -> None:
        try:
            self.connector.disconnect_volume(props, None)
        except Exception:
            pass


class StatusTestCase(CliTestCase):

    def test_json_lists_instances_and_volumes_with_dirty_and_hits(self):
        wt = self.attach(VOL_WT, 'wt')
        wb = self.attach(VOL_WB, 'wb')
        [wb_core] = [c for c in self.cores() if c.cache_id == 2]
        self.host.set_dirty(2, wb_core.core_id, 40)
        self.host.record_reads(1, 1, total=200, hits=150)

        code, out, err = self.cli('status', '--format', 'json')
        self.assertEqual(0, code, err)
        caches = {c['cache_id']: c for c in json.loads(out)}
        self.assertEqual(({'wt', 'wb'}, 'wb'), (
            {c['mode'] for c in caches.values()}, caches[2]['mode']))
        self.assertEqual('wt', caches[1]['configured_mode'])
        [core_wt] = caches[1]['cores']
        [core_wb] = caches[2]['cores']
        self.assertEqual((VOL_WT, wt['path'], 0.75),
                         (core_wt['volume_id'], core_wt['exported'],
                          core_wt['read_hit_ratio']))
        self.assertEqual('/dev/rbd/volumes/volume-' + VOL_WT,
                         core_wt['rbd_device'])
        self.assertEqual((VOL_WB, wb['path'], 40),
                         (core_wb['volume_id'], core_wb['exported'],
                          core_wb['dirty_blocks']))
        self.assertEqual(40, caches[2]['dirty_blocks'])

    def test_table_names_each_volume_and_device(self):
        info = self.attach(VOL_WB, 'wb')
        code, out, _ = self.cli('status')
        self.assertEqual(0, code)
        [row] = [line for line in out.splitlines() if VOL_WB in line]
        self.assertIn(info['path'], row)
        self.assertIn('Active', row)
        self.assertIn('/dev/rbd/volumes/volume-' + VOL_WB, row)

    def test_module_not_loaded_is_a_clear_error(self):
        self.host.set_module_loaded(False)
        code, _, err = self.cli('status')
        self.assertEqual(1, code)
        self.assertIn('modprobe', err)


class DoctorTestCase(CliTestCase):

    def doctor(self) -> tuple[int, list[str]]:
        code, out, _ = self.cli('doctor')
        return code, out.splitlines()

    def test_healthy_host_passes(self):
        self.attach(VOL_WB, 'wb')
        code, lines = self.doctor()
        self.assertEqual(0, code, lines)
        self.assertEqual('all checks passed', lines[-1])
        self.assertTrue(all(line.startswith('OK ') for line in lines[:-1]))

    def test_each_problem_is_one_line_with_what_to_do(self):
        self.attach(VOL_WB, 'wb')
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 9)
        self.host.reboot()              # core inactive, cache Incomplete
        self.write_opencas_conf([1])    # wb instance no longer persistent
        self.conf.config(group='os_brick_cas',
                         cache_instances={'wt': '1', 'wb': '2', 'wo': '3'})
        code, lines = self.doctor()
        self.assertEqual(2, code)           # failures, not only warnings
        problems = [line for line in lines if not line.startswith('OK ')]
        text = '\n'.join(problems)
        self.assertIn('FAIL mode wo -> cache instance 3', text)
        self.assertIn('FAIL cache instance 2 holds wb data but is not '
                      'listed under [caches]', text)
        self.assertIn('is inactive with 9 dirty blocks', text)
        self.assertIn('detach the volume', text)
        self.assertTrue(problems[-1].endswith('need attention'))

    def test_listed_core_of_a_cache_that_did_not_load(self):
        self.attach(VOL_WB, 'wb')
        [core] = self.cores()
        self.host.reboot(not_started=[core.cache_id])
        code, lines = self.doctor()
        self.assertEqual(2, code)
        [line] = [line for line in lines if 'which is not running' in line]
        self.assertTrue(line.startswith('FAIL volume %s' % VOL_WB), line)
        self.assertIn('casctl start', line)
        # and with the module gone too, the row is still reported
        self.host.set_module_loaded(False)
        code, lines = self.doctor()
        self.assertEqual(2, code)
        self.assertIn('which is not running', '\n'.join(lines))

    def test_module_not_loaded(self):
        self.host.set_module_loaded(False)
        code, lines = self.doctor()
        self.assertEqual(2, code)
        self.assertIn('modprobe cas_cache', lines[0])

    def test_warnings_only_exit_1(self):
        self.attach(VOL_WB, 'wb')
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 5)
        self.host.reboot()              # inactive core: a warning, no failure
        code, lines = self.doctor()
        self.assertEqual(1, code, lines)
        self.assertFalse([line for line in lines if line.startswith('FAIL')])

    def test_json_healthy_host(self):
        self.attach(VOL_WB, 'wb')
        code, out, _ = self.cli('doctor', '--format', 'json')
        doc = json.loads(out)
        self.assertEqual((0, 0, 'OK'), (code, doc['exit_code'],
                                        doc['result']))
        self.assertEqual({'OK'}, {f['level'] for f in doc['findings']})
        self.assertTrue(any('is supported by Open CAS 26.03' in f['message']
                            for f in doc['findings']))

    def test_json_broken_host(self):
        self.conf.config(group='os_brick_cas',
                         cache_instances={'wt': '1', 'wb': '2', 'wo': '3'})
        code, out, _ = self.cli('doctor', '--format', 'json')
        doc = json.loads(out)
        self.assertEqual((2, 2, 'FAIL'), (code, doc['exit_code'],
                                          doc['result']))
        fails = [f['message'] for f in doc['findings']
                 if f['level'] == 'FAIL']
        self.assertTrue(fails[0].startswith('mode wo -> cache instance 3'),
                        fails)

    def test_casadm_older_than_24_9_fails(self):
        self.host.set_version('22.6.3.0724.release')
        code, lines = self.doctor()
        self.assertEqual(2, code)
        [fail] = [line for line in lines if 'per-core flush' in line]
        self.assertTrue(fail.startswith('FAIL casadm 22.6.3.0724.release is '
                                        'older than Open CAS 24.9'), fail)
        self.assertIn('Upgrade Open CAS to 24.9 or newer', fail)

    def test_kernel_newer_than_the_open_cas_line_fails(self):
        with mock.patch('platform.release', return_value='6.19.2-generic'):
            code, lines = self.doctor()
        self.assertEqual(2, code)
        [fail] = [line for line in lines if line.startswith('FAIL')]
        self.assertIn('kernel 6.19.2-generic is newer than Open CAS 26.03 '
                      'supports (up to 6.18): upgrade Open CAS to 26.09',
                      fail)


class FlushTestCase(CliTestCase):

    def test_flush_one_volume_with_progress(self):
        self.attach(VOL_WB, 'wb')
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 30)
        code, out, err = self.cli('flush', '--volume', VOL_WB)
        self.assertEqual(0, code, err)
        self.assertIn('30 dirty blocks, flushing', out)
        self.assertIn('0 dirty blocks left', out)
        self.assertEqual(0, self.dirty(core))
        self.assertEqual(30, self.host.state()['flushed_blocks'])
        # flushed, still attached
        self.assertEqual(1, len(self.cores()))

    def test_flush_all_reports_failures_and_keeps_their_data(self):
        self.attach(VOL_WB, 'wb')
        self.attach(VOL_WT, 'wt')
        [core] = [c for c in self.cores() if c.cache_id == 2]
        self.host.set_dirty(core.cache_id, core.core_id, 12)
        self.host.inject_fault('flush-core', exit_code=1, stderr=(
            'Error while flushing core %d of cache 2\nError while flushing '
            'data\n' % core.core_id))
        code, out, err = self.cli('flush', '--all')
        self.assertEqual(1, code)
        self.assertIn('[1/1] volume %s' % VOL_WB, out)   # wb instance only
        self.assertIn('FAILED', out)
        self.assertIn('still in the cache', err)
        self.assertEqual(12, self.dirty(core))
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])

    def test_flush_times_out_within_its_bound(self):
        self.attach(VOL_WB, 'wb')
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 100)
        self.host.set_flush_speed(100)      # 10 s for 100 blocks
        code, out, err = self.cli('flush', '--volume', VOL_WB,
                                  '--timeout', '1')
        self.assertEqual(1, code)
        self.assertIn('timeout 1s', out)
        self.assertGreater(self.dirty(core), 0)

    def test_unknown_volume(self):
        self.assertRaises(SystemExit, self.cli, 'flush', '--volume', VOL_WT)


class BenchTestCase(CliTestCase):
    """fio from the distribution, on a file and on a real loop device."""

    def setUp(self):
        super().setUp()
        if not os.path.exists('/usr/bin/fio'):
            self.skipTest('fio is not installed (tools/install-system-'
                          'packages.sh installs it)')
        self.file = os.path.join(self.tmp, 'bench.img')
        with open(self.file, 'wb') as image:
            image.truncate(32 * 2 ** 20)

    def loop_device(self) -> str:
        loop = subprocess.run(['losetup', '--find', '--show', self.file],
                              capture_output=True, text=True)
        if loop.returncode:
            self.skipTest('no loop device here: %s' % loop.stderr.strip())
        device = loop.stdout.strip()
        self.addCleanup(subprocess.run, ['losetup', '-d', device])
        return device

    def test_table_side_by_side_on_loop_device_and_file(self):
        device = self.loop_device()
        code, out, err = self.cli(
            'bench', '--device', 'loop=' + device, '--device',
            'file=' + self.file, '--runtime', '1', '--destroy-data',
            '--profiles', 'randread-qd1,randrw70-qd16',
            '--where', 'unit test on this machine')
        self.assertEqual(0, code, err)
        self.assertIn('measured on: unit test on this machine', out)
        rows = [line.split() for line in out.splitlines()]
        for profile, direction in (('randread-qd1', 'read'),
                                   ('randrw70-qd16', 'read'),
                                   ('randrw70-qd16', 'write')):
            for label in ('loop', 'file'):
                [row] = [r for r in rows if r[:3] == [profile, direction,
                                                      label]]
                self.assertGreater(float(row[3]), 0)   # avg latency
        self.assertEqual(3, sum(1 for r in rows if r[:1] == ['ratio']))

    def test_json_for_machines(self):
        code, out, err = self.cli(
            'bench', '--device', self.file, '--runtime', '1',
            '--profiles', 'randwrite-qd1', '--json')
        self.assertEqual(0, code, err)
        document = json.loads(out)
        [result] = document['results']
        self.assertEqual('randwrite-qd1', result['profile'])
        self.assertGreater(result['write']['iops'], 0)
        self.assertNotIn('read', result)

    def test_write_profiles_on_a_block_device_need_consent(self):
        device = self.loop_device()
        self.assertRaises(SystemExit, self.cli, 'bench', '--device', device,
                          '--runtime', '1', '--profiles', 'randwrite-qd1')


class DoctorConfigurationTestCase(CliTestCase):

    def test_mode_mapped_to_an_instance_of_another_mode(self):
        self.conf.config(group='os_brick_cas',
                         cache_instances={'wt': '2', 'wb': '1'})
        code, out, _ = self.cli('doctor')
        self.assertEqual(2, code)
        self.assertIn('FAIL mode wt -> cache instance 2', out)
        self.assertIn('runs in mode wb', out)


class ConfigFilesTestCase(CliTestCase):
    """[os_brick_cas] comes from --config-file/--config-dir or nova.conf."""

    def setUp(self):
        super().setUp()
        # the files below must decide cache_instances, not the fixture
        self.conf.conf.clear_override('cache_instances', group='os_brick_cas')
        self.swapped = os.path.join(self.tmp, 'swapped.conf')
        with open(self.swapped, 'w') as conf_file:
            conf_file.write('[os_brick_cas]\ncache_instances = wt:2,wb:1\n')

    def test_config_file_after_the_verb(self):
        code, out, err = self.cli('doctor', '--config-file', self.swapped)
        self.assertEqual(2, code, err)
        self.assertIn('FAIL mode wt -> cache instance 2', out)

    def test_nova_conf_dir_read_by_default(self):
        conf_dir = os.path.join(self.tmp, 'nova.conf.d')
        os.mkdir(conf_dir)
        os.rename(self.swapped, os.path.join(conf_dir, '50-cas.conf'))
        with mock.patch.object(cli, 'NOVA_CONF_DIR', conf_dir):
            code, out, err = self.cli('doctor')
        self.assertEqual(2, code, err)
        self.assertIn('FAIL mode wt -> cache instance 2', out)

    def test_missing_config_file_is_one_line_not_a_traceback(self):
        code, _, err = self.cli('status', '--config-file=/nonexistent.conf')
        self.assertEqual(2, code)
        self.assertEqual('os-brick-cas: configuration: Failed to find some '
                         'config files: /nonexistent.conf', err.strip())
