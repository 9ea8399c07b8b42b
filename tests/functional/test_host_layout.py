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

"""``os-brick-cas host plan|apply|check`` against the simulated host.

casadm -S/-X/-G/--check-cache-device of the simulator stand in for Open
CAS; the layout, RAM sizing, opencas.conf rows and drift reports are the
real code's.
"""

import contextlib
import io
import logging
import math
import os
from typing import Optional

import fixtures

from cas_standin import module as sim_module
from nova_ext import opts as nova_opts  # noqa: F401  (drain budgets)
from os_brick_cas.cmd import doctor
from os_brick_cas.cmd import main as cli
from tests.functional import base

GIB = 2 ** 30
#: the verbs that only read the host
READ_ONLY = {'list-caches', 'version', 'get-param', 'stats',
             'check-cache-device'}
LAYOUT = """flush_rate_mib_s: %(rate)s
instances:
  - {id: 1, mode: wt, device: /dev/ram0}
  - id: 2
    mode: wb
    device: /dev/ram1
    line_size_kib: 64
%(extra)s"""
CORE_ROW = '2\t1\t/dev/disk/by-id/rbd-volumes-volume-x\tlazy_startup=true'


class HostLayoutTestCase(base.FunctionalTestCase):

    caches: dict[int, str] = {}

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.tmp, 'root')
        self._write('proc/meminfo', 'MemTotal: 67108864 kB\n'
                                    'MemAvailable: 33554432 kB\n')
        self.sizes = {'ram0': 100 * GIB, 'ram1': 200 * GIB}
        for name, size in self.sizes.items():
            self._write('sys/class/block/%s/size' % name, str(size // 512))
        self.layout = os.path.join(self.tmp, 'host-layout.yaml')
        self.write_layout()
        with open(self.opencas_conf, 'a') as conf_file:
            conf_file.write(CORE_ROW + '\n')
        self.conf.config(group='os_brick_cas', host_layout=self.layout,
                         host_root=self.root)

    def _write(self, relative: str, text: str) -> None:
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as out:
            out.write(text)

    def write_layout(self, rate: float = 200, extra: str = '') -> None:
        with open(self.layout, 'w') as out:
            out.write(LAYOUT % {'rate': rate, 'extra': extra})

    def host_cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(['host'] + list(argv))
        return code, out.getvalue(), err.getvalue()

    def casadm_verbs(self, since: int = 0) -> list[str]:
        return [call['verb'] for call in self.host.calls('casadm')[since:]]

    def read_conf(self) -> str:
        with open(self.opencas_conf) as conf_file:
            return conf_file.read()

    def stop_leaving_metadata(self, device: str, cache_id: int) -> None:
        self._tool('casadm', '-S', '-i', str(cache_id), '-d', device,
                   '-c', 'wb', '-x', '64')
        self._tool('casadm', '-T', '-i', str(cache_id))

    # -- plan -------------------------------------------------------------
    def test_plan_prints_actions_ram_and_reservation_and_changes_nothing(
            self):
        before = self.read_conf()
        code, out, err = self.host_cli('plan')
        self.assertEqual(0, code, err)
        self.assertIn('would start it: casadm --start-cache --cache-device '
                      '/dev/ram1 --cache-id 2 --cache-mode wb '
                      '--cache-line-size 64', out)
        self.assertIn('would casadm --set-param --name cleaning-alru '
                      '--cache-id 2 --wake-up 5 --staleness-time 30 '
                      '--activity-threshold 1000 --dirty-ratio-threshold 20',
                      out)
        # the published figures: 1 GiB + 2.05 % at 4 KiB, 0.175 % at 64 KiB
        needed_mib = 1024 + (0.0205 * 100 + 0.00175 * 200) * 1024
        self.assertIn('reserved_host_memory_mb = %d' % (
            512 + math.ceil(needed_mib)), out)
        self.assertIn('MemTotal 64.0 GiB, MemAvailable 32.0 GiB', out)
        worst = 0.2 * (200 * GIB - 0.00175 * 200 * GIB)
        self.assertIn('worst-case drain %.0f s' % (worst / 2 ** 20 / 200),
                      out)
        verbs = self.casadm_verbs()
        self.assertIn('check-cache-device', verbs)
        self.assertEqual(set(), set(verbs) - READ_ONLY, verbs)
        self.assertEqual(before, self.read_conf())

    def test_plan_and_apply_warn_of_a_wb_instance_the_release_can_lose(
            self):
        self._write('sys/module/cas_cache/version', '26.03.2.0000.release\n')
        warning = ('WARN instance 2 (wb): Open CAS 26.03.2.0000.release has '
                   'known defect ocf-hit-invalid-backfill, which can lose '
                   'acknowledged wb writes; new wb attaches will be refused')
        for verb in ('plan', 'apply'):
            code, out, err = self.host_cli(verb)
            self.assertEqual(0, code, err)
            self.assertIn(warning, out)
            self.assertIn('accepted_data_loss_defects = '
                          'ocf-hit-invalid-backfill', out)
            self.assertNotIn('instance 1 (wt): Open CAS', out)
            # the crash defect of the same release: a warning, every mode
            self.assertIn('WARN Open CAS 26.03.2.0000.release has known '
                          'defect ocf-alock-read-holders: a host crash', out)
        self.conf.config(group='os_brick_cas',
                         accepted_data_loss_defects=[
                             'ocf-hit-invalid-backfill'])
        out = self.host_cli('plan')[1]
        self.assertNotIn('known defect ocf-hit-invalid-backfill', out)
        self.assertIn('known defect ocf-alock-read-holders', out)
        self._write('sys/module/cas_cache/version', '25.12.2.0000.release\n')
        self.conf.conf.clear_override('accepted_data_loss_defects',
                                      group='os_brick_cas')
        self.assertNotIn('known defect', self.host_cli('plan')[1])

    def test_plan_warns_of_nothing_once_the_patched_build_is_loaded(self):
        # the role's v26.03.2 build with its patch series, loaded: its
        # manifest lists both fixes and its srcversion is the loaded one
        built = sim_module.build(self.root, '26.03.2.0000.release')
        sim_module.load(self.root, '26.03.2.0000.release', built)
        code, out, err = self.host_cli('plan')
        self.assertEqual(0, code, err)
        self.assertNotIn('known defect', out)
        # the release's own module loaded instead (not rebuilt, or the old
        # module still loaded): both come back
        sim_module.load(self.root, '26.03.2.0000.release')
        out = self.host_cli('plan')[1]
        self.assertIn('known defect ocf-hit-invalid-backfill', out)
        self.assertIn('known defect ocf-alock-read-holders', out)

    # -- apply --------------------------------------------------------------
    def test_apply_twice_changes_nothing_the_second_time(self):
        code, out, err = self.host_cli('apply')
        self.assertEqual(0, code, err)
        self.assertIn('changed instance 2: start it', out)
        self.assertIn('the host matches', out)
        caches = {c.cache_id: c for c in self.cache_list()}
        self.assertEqual(('wt', 'wb'), (caches[1].mode, caches[2].mode))
        conf_text = self.read_conf()
        self.assertIn('2\t/dev/ram1\tWB\tcache_line_size=64,'
                      'cleaning_policy=alru,promotion_policy=always',
                      conf_text)
        self.assertIn(CORE_ROW, conf_text)
        mark = len(self.host.calls('casadm'))

        code, out, err = self.host_cli('apply')
        self.assertEqual(0, code, err)
        self.assertIn('nothing to change', out)
        verbs = self.casadm_verbs(mark)
        self.assertTrue(verbs)
        self.assertEqual(set(), set(verbs) - READ_ONLY, verbs)
        self.assertEqual(conf_text, self.read_conf())

    def test_apply_refuses_a_device_with_old_metadata_and_never_forces(self):
        self.stop_leaving_metadata('/dev/ram1', 2)
        mark = len(self.host.calls('casadm'))
        code, out, err = self.host_cli('apply')
        self.assertEqual(2, code)
        self.assertIn('/dev/ram1 holds Open CAS metadata', err)
        self.assertIn("Load it with 'casadm -S -d /dev/ram1 -l'", err)
        self.assertIn('Nothing was changed.', err)
        self.assertEqual(set(), set(self.casadm_verbs(mark)) - READ_ONLY)
        self.assertEqual([], self.cache_list())
        self.assertFalse([argv for argv in self.casadm_argvs()
                          if '--force' in argv or '-f' in argv])

        # asked to, it loads the instance (-S -d DEV -l, no id) and tunes it
        code, out, err = self.host_cli('apply', '--load-existing')
        self.assertEqual(0, code, err)
        self.assertIn(['casadm', '--start-cache', '--cache-device',
                       '/dev/ram1', '--load'], self.casadm_argvs())
        self.assertEqual({1, 2}, {c.cache_id for c in self.cache_list()})

    def test_apply_leaves_a_running_instance_in_another_mode_alone(self):
        self._tool('casadm', '-S', '-i', '2', '-d', '/dev/ram1', '-c', 'wt',
                   '-x', '64')
        self._tool('casadm', '-S', '-i', '9', '-d', '/dev/ram5')
        mark = len(self.host.calls('casadm'))
        code, out, err = self.host_cli('apply')
        self.assertEqual(2, code)
        self.assertIn('REFUSED instance 2: it runs in mode wt, the layout '
                      'wants wb; os-brick-cas does not switch modes', err)
        self.assertEqual(set(), set(self.casadm_verbs(mark)) - READ_ONLY)
        code, out, _ = self.host_cli('check')
        self.assertEqual(2, code)
        self.assertIn('WARN instance 2: cache mode is wt, the layout wants wb',
                      out)
        self.assertIn('WARN instance 9 (wt) runs but is not in the host '
                      'layout', out)

    def test_check_reports_a_hand_changed_cleaning_policy(self):
        self.assertEqual(0, self.host_cli('apply')[0])
        code, out, _ = self.host_cli('check')
        self.assertEqual(0, code, out)
        self._tool('casadm', '-X', '-n', 'cleaning', '-i', '2', '-p', 'acp')
        code, out, _ = self.host_cli('check')
        self.assertEqual(1, code, out)
        self.assertIn('WARN instance 2: cleaning policy is acp, the layout '
                      'wants alru', out)
        # doctor reports it too, through its one host hook
        self.conf.config(group='os_brick_cas',
                         cache_instances={'wt': '1', 'wb': '2'})
        self.assertIn('WARN instance 2: cleaning policy is acp, the layout '
                      'wants alru (changed by hand? "os-brick-cas host '
                      'apply" sets it back)', [
                          str(f) for f in doctor.check_host(self.casadm())])
        self.assertEqual(0, self.host_cli('apply')[0])
        self.assertEqual(0, self.host_cli('check')[0])

    def test_a_core_attached_after_apply_gets_the_layouts_seq_cutoff(self):
        # sequential cut-off is per core: apply sets the cores it finds,
        # the attach sets the ones it adds, so check stays clean
        self.write_layout(extra='    seq_cutoff: {threshold_kib: 128}\n')
        self.assertEqual(0, self.host_cli('apply')[0])
        self.conf.config(group='os_brick_cas',
                         cache_instances={'wt': '1', 'wb': '2'})
        for mode in ('wt', 'wb'):
            self.connector.connect_volume(
                self.props(self.image('volume-seq-%s' % mode), mode))
        self.assertEqual(
            {1: ('always', '64'), 2: ('always', '128')},
            {core.cache_id: self.seq_cutoff(core) for core in self.cores()})
        code, out, _ = self.host_cli('check')
        self.assertEqual(0, code, out)
        self.assertNotIn('seq-cutoff', out)

    def test_a_core_attached_without_a_layout_keeps_open_cas_defaults(self):
        os.unlink(self.layout)
        self._tool('casadm', '-S', '-i', '1', '-d', '/dev/ram0', '-c', 'wt')
        self.conf.config(group='os_brick_cas', cache_instances={'wt': '1'})
        mark = len(self.host.calls('casadm'))
        self.connector.connect_volume(self.props(self.image('volume-nl')))
        [core] = self.cores()
        self.assertEqual(('full', '1024'), self.seq_cutoff(core))
        self.assertNotIn('set-param', self.casadm_verbs(mark))

    def test_a_failing_seq_cutoff_call_costs_a_warning_not_the_attach(self):
        self.assertEqual(0, self.host_cli('apply')[0])
        self.conf.config(group='os_brick_cas', cache_instances={'wb': '2'})
        self.host.inject_fault('set-param', stderr='Setting runtime '
                               'parameter failed!\n')
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        info = self.connector.connect_volume(
            self.props(self.image('volume-seqfail'), 'wb'))
        [core] = self.cores()
        self.assertEqual(core.exported, info['path'])
        self.assertEqual(('full', '1024'), self.seq_cutoff(core))
        self.assertIn('Could not give core %d of cache instance 2 the host '
                      "layout's sequential cut-off (threshold 64, "
                      'policy always)' % core.core_id, logs.output)
        self.assertIn('run "os-brick-cas host apply" to set it', logs.output)
        code, out, _ = self.host_cli('check')
        self.assertEqual(1, code, out)
        self.assertIn('instance 2 core %d: seq-cutoff policy is full, the '
                      'layout wants always' % core.core_id, out)

    def seq_cutoff(self, core) -> tuple[str, str]:
        found = self.casadm().get_params('seq-cutoff', core.cache_id,
                                         core.core_id)
        return (found['Sequential cutoff policy'],
                found['Sequential cutoff threshold [KiB]'])

    def casadm(self):
        from os_brick_cas import casadm
        return casadm.Casadm()

    def test_dirty_ratio_refused_on_a_release_without_it(self):
        self.host.set_version('25.03.0.0000.release')
        self.write_layout(extra='    cleaning: '
                                '{dirty_ratio_threshold_pct: 10}\n')
        code, out, err = self.host_cli('apply')
        self.assertEqual(2, code)
        self.assertIn('cleaning.dirty_ratio_threshold_pct needs Open CAS '
                      'v25.12 or newer (casadm --dirty-ratio-threshold); '
                      'this host runs v25.03', err)
        self.assertEqual([], self.cache_list())
        # left to the default, it is simply not set on that release
        self.write_layout()
        code, out, err = self.host_cli('apply')
        self.assertEqual(0, code, err)
        self.assertFalse([a for a in self.casadm_argvs()
                          if '--dirty-ratio-threshold' in a])

    # -- drain budgets --------------------------------------------------------
    def drain_line(self, out: str) -> Optional[str]:
        lines = [line for line in out.splitlines()
                 if 'worst-case drain' in line]
        return lines[0] if lines else None

    def test_drain_prediction_against_nova_budgets(self):
        self.assertEqual(0, self.host_cli('apply')[0])
        # 20 % of the simulator's 10 GiB instance at 10 MiB/s
        self.write_layout(rate=10)
        self.conf.config(group='os_brick_cas_nova',
                         live_migration_drain_timeout=45,
                         snapshot_drain_timeout=30)
        code, out, _ = self.host_cli('check')
        self.assertEqual(1, code, out)
        line = self.drain_line(out)
        self.assertTrue(line.startswith('WARN instance 2 (wb): worst-case '
                                        'drain 205 s'), line)
        self.assertIn('above [os_brick_cas_nova] '
                      'live_migration_drain_timeout = 45 s and '
                      '[os_brick_cas_nova] snapshot_drain_timeout = 30 s',
                      line)
        self.conf.config(group='os_brick_cas_nova',
                         live_migration_drain_timeout=300,
                         snapshot_drain_timeout=300)
        code, out, _ = self.host_cli('check')
        self.assertEqual(0, code, out)
        self.assertTrue(self.drain_line(out).startswith('OK '))

    def test_measure_flush_records_the_rate_it_saw(self):
        self.assertEqual(0, self.host_cli('apply')[0])
        self.conf.config(group='os_brick_cas',
                         cache_instances={'wt': '1', 'wb': '2'})
        image = self.image('volume-flushrate')
        self.connector.connect_volume(self.props(image, 'wb'))
        [core] = [c for c in self.cores() if c.cache_id == 2]
        self.host.set_dirty(2, core.core_id, 2048)        # 8 MiB
        self.host.set_flush_speed(1)                      # ~2 s
        code, out, _ = self.host_cli('check', '--measure-flush')
        self.assertIn('OK   instance 2 flushed 8.0 MiB in', out)
        self.assertEqual(0, self.dirty(core))
        rate = float(out.split('s: ')[1].split(' MiB/s')[0])
        self.assertTrue(0 < rate <= 8 / 2.0, rate)
        self.assertIn('at %.1f MiB/s (measured' % rate, out)
        self.connector.disconnect_volume(self.props(image, 'wb'), None)

    # -- plan from the layout alone (issue 37) ------------------------------
    def without_casadm(self) -> None:
        """PATH as on a host where Open CAS is not installed yet."""
        empty = os.path.join(self.tmp, 'no-casadm')
        os.makedirs(empty, exist_ok=True)
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', empty + os.pathsep + '/usr/bin:/bin'))

    def test_plan_without_open_cas_sizes_every_instance_of_the_layout(self):
        # main: "casadm was not found" and exit 2: nothing sized
        self.write_layout(extra='  - id: 3\n    mode: wb\n'
                                '    device: /dev/disk/by-id/nvme-new-part1\n'
                                '    size_gib: 800\n')
        self.without_casadm()
        code, out, err = self.host_cli('plan')
        self.assertEqual(0, code, err)
        self.assertIn('sized from the layout alone', out)
        self.assertIn('instance 1 (wt, 4 KiB lines): 100.0 GiB cache', out)
        self.assertIn('instance 3 (wb, 4 KiB lines): 800.0 GiB cache, '
                      '16.4 GiB of metadata', out)
        self.assertIn('reserved_host_memory_mb = ', out)
        self.assertIn('instance 3 (wb): worst-case drain', out)
        self.assertNotIn('  would ', out)     # no actions without casadm
        code, out, err = self.host_cli('plan', '-f', 'json')
        sizes = {item['cache_id']: item['size_bytes']
                 for item in __import__('json').loads(out)['instances']}
        self.assertEqual({1: 100 * GIB, 2: 200 * GIB, 3: 800 * GIB}, sizes)

    def test_no_heading_without_figures_for_devices_of_unknown_size(self):
        # main: "Memory:" over lines saying the size is unknown, a RAM
        # total of Open CAS's 1 GiB alone, and "Drain time (wb/wo):" over
        # "cache size unknown, drain time not predicted"
        for name in self.sizes:
            os.unlink(os.path.join(self.root, 'sys/class/block/%s/size'
                                   % name))
        code, out, err = self.host_cli('plan')
        self.assertEqual(0, code, err)
        lines = out.splitlines()
        [memory] = [line for line in lines if line.startswith('Memory')]
        self.assertIn('Memory: not estimated: size of instance 1 '
                      '(/dev/ram0), 2 (/dev/ram1) unknown', memory)
        self.assertIn('no size_gib in the layout', memory)
        self.assertNotIn('Drain time', out)
        self.assertNotIn('Open CAS needs about', out)

    def test_plan_says_how_many_shared_volumes_fit_and_what_a_share_buys(
            self):
        # issue 35: ids and percent left per instance, cache per share
        code, _out, err = self.host_cli('apply')
        self.assertEqual(0, code, err)
        table = os.path.join(self.tmp, 'table.csv')
        with open(table, 'w') as out:
            out.write('IO class id,IO class name,Eviction priority,'
                      'Allocation\n0,unclassified,255,0.7\n'
                      '1,core_id:eq:1&done,,0.3\n2,core_id:eq:2&done,0,0\n')
        self._tool('casadm', '-C', '-C', '-i', '2', '-f', table)
        code, out, err = self.host_cli('plan', '-f', 'json')
        self.assertEqual(0, code, err)
        plans = {item['cache_id']: item['shares']
                 for item in __import__('json').loads(out)['instances']}
        self.assertEqual((0, 0, 32, 100), tuple(plans[1][key] for key in (
            'drains', 'shares', 'ids_left', 'percent_left')))
        self.assertEqual((1, 1, 30, 30, 70), tuple(plans[2][key] for key in (
            'drains', 'shares', 'share_percent', 'ids_left',
            'percent_left')))
        # 200 GiB less its metadata (0.175 % at 64 KiB lines), in whole
        # 64 KiB lines, a quarter of them rounded up
        lines = (200 * GIB - math.ceil(200 * GIB * 0.00175)) // (64 << 10)
        self.assertAlmostEqual(math.ceil(lines / 4) * (64 << 10),
                               plans[2]['bytes_per_share']['25'],
                               delta=64 << 10)
        code, out, err = self.host_cli('plan')
        self.assertIn('instance 2: room for 30 more shared volume(s) (30 IO '
                      'class ids of 32 left: 1 drained, 1 shared) within 70%',
                      out)
