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

"""The peer benchmark's logic (benchmarks/peers_data.py, run_case)."""

import dataclasses
import importlib.util
import json
import os
from unittest import mock

import fixtures
import testtools

from benchmarks import peers
from os_brick_cas import exception
from os_brick_cas.host import layout_file
from os_brick_cas.opencas import casadm_params as P

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, 'tests', 'unit', 'os_brick_cas', 'data',
                      'fio_randrw70_qd1.json')


def _load():
    spec = importlib.util.spec_from_file_location(
        'peers_data', os.path.join(ROOT, 'benchmarks', 'peers_data.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


data = _load()


class FioTest(testtools.TestCase):

    def test_parse_real_fio_json(self):
        with open(SAMPLE) as source:
            text = source.read()
        job = json.loads(text)['jobs'][0]
        parsed = data.parse_fio('fio: a warning first\n' + text)
        for name in ('read', 'write'):
            self.assertEqual(job[name]['total_ios'], parsed[name]['ios'])
            self.assertAlmostEqual(job[name]['lat_ns']['mean'] / 1000.0,
                                   parsed[name]['avg_us'])
            self.assertAlmostEqual(
                job[name]['lat_ns']['percentile']['99.000000'] / 1000.0,
                parsed[name]['p99_us'])
        self.assertEqual(job['read']['total_ios'] + job['write']['total_ios'],
                         parsed['ios'])

    def test_failed_job_refused(self):
        self.assertRaises(ValueError, data.parse_fio,
                          json.dumps({'jobs': [{'error': 5}]}))
        self.assertRaises(ValueError, data.parse_fio, 'no json')

    def test_argv_time_based_or_every_block_once(self):
        cases = {case.name: case for case in data.CASES}
        timed = data.fio_argv(cases['zipf-randread-qd1'], '/dev/x', 7, 96)
        self.assertIn('--runtime=7', timed)
        self.assertIn('--norandommap', timed)
        self.assertIn('--size=96M', timed)
        self.assertIn('--random_distribution=zipf:1.1', timed)
        warm = data.fio_argv(cases['warm-up'], '/dev/x', 7, 16)
        self.assertNotIn('--time_based', warm)
        self.assertNotIn('--norandommap', warm)
        self.assertIn('--size=16M', warm)


class CpuTest(testtools.TestCase):
    BEFORE = 'cpu  100 0 50 1000 20 0 5 0 0 0\ncpu0 1 2 3 4\n'
    AFTER = 'cpu  160 0 90 1500 30 0 5 0 0 0\ncpu0 1 2 3 4\n'

    def test_busy_ticks_leave_idle_and_iowait_out(self):
        self.assertEqual((155, 1175), data.cpu_busy_ticks(self.BEFORE))

    def test_per_io(self):
        # 100 busy ticks at 100 Hz = 1 s over 1000 IOs = 1000 us
        self.assertEqual(1000.0, data.cpu_us_per_io(
            self.BEFORE, self.AFTER, 1000, 100))
        self.assertIsNone(data.cpu_us_per_io(self.BEFORE, self.AFTER, 0,
                                             100))


class StatusTest(testtools.TestCase):

    def test_bcache_sizes(self):
        self.assertEqual(0, data.parse_bcache_size('0.0k'))
        self.assertEqual(512, data.parse_bcache_size('512\n'))
        self.assertEqual(int(12.5 * 2 ** 20), data.parse_bcache_size('12.5M'))
        self.assertEqual(2 ** 30, data.parse_bcache_size('1.0G'))
        self.assertRaises(ValueError, data.parse_bcache_size, '12 MiB')

    def test_dmcache_status(self):
        # the kernel documentation's field order (dm-cache, Status)
        line = ('0 196608 cache 8 27/2048 64 812/1024 301 52 88 640 3 '
                '815 17 1 writeback 2 migration_threshold 2048 smq 0 rw -')
        status = data.parse_dmcache_status(line)
        self.assertEqual({'block_sectors': 64, 'used_blocks': 812,
                          'total_blocks': 1024, 'read_hits': 301,
                          'read_misses': 52, 'write_hits': 88,
                          'write_misses': 640, 'dirty_blocks': 17}, status)
        self.assertRaises(ValueError, data.parse_dmcache_status,
                          line.replace(' cache ', ' linear '))

    def test_writecache_status(self):
        old = data.parse_writecache_status('0 196608 writecache 0 16000 '
                                           '15000 12')
        self.assertEqual({'error': 0, 'total_blocks': 16000,
                          'free_blocks': 15000, 'writeback_blocks': 12}, old)
        new = data.parse_writecache_status(
            '0 196608 writecache 0 16000 15000 12 400 37 900 1 2 3 4 5')
        self.assertEqual((400, 37), (new['read_blocks'], new['read_hits']))


class TableTest(testtools.TestCase):

    def test_stacks_and_cases(self):
        stack_list = data.stacks([data.parse_variant(text)
                                  for text in data.DEFAULT_VARIANTS])
        names = [stack.name for stack in stack_list]
        self.assertEqual(['krbd', 'cas-wb', 'cas-wb-acp', 'cas-wb-ocf',
                          'cas-wb-fmb1000', 'cas-wb-64k', 'cas-wb-noseq',
                          'bcache-wb', 'dmcache-wb', 'dmwritecache',
                          'cas-wt', 'cas-wt-always', 'bcache-wt',
                          'dmcache-wt'], names)
        by_name = {stack.name: stack for stack in stack_list}
        wb_cases = [c.name for c in data.cases_for(by_name['bcache-wb'])]
        wt_cases = [c.name for c in data.cases_for(by_name['bcache-wt'])]
        self.assertIn('fill-no-cleaning', wb_cases)
        self.assertNotIn('fill-no-cleaning', wt_cases)
        self.assertEqual(len(data.CASES), len(wb_cases))
        # the warm-up comes before the hit cases it feeds
        self.assertLess(wt_cases.index('warm-up'),
                        wt_cases.index('hit-randread-qd1'))
        self.assertEqual(len(stack_list), len(data.plan(stack_list)))

    def test_every_study_case_present(self):
        studies = ' '.join(case.study for case in data.CASES)
        for number in '12345':
            self.assertIn('%s:' % number, studies)


class LayoutTest(testtools.TestCase):
    """An Open CAS stack's host layout: the product's defaults, variants."""

    @staticmethod
    def values(instance, release=(25, 12)):
        return {(s.param.namespace, s.param.field): s.value
                for s in instance.settings(release)}

    def test_the_products_stack_has_the_products_defaults(self):
        cleaning = layout_file.DIRTY_DEFAULTS[P.CLEANING]
        instance = data.Stack('cas-wb', 'cas', 'wb').instance_layout(
            1, '/dev/ram0')
        values = self.values(instance)
        self.assertEqual(layout_file.DEFAULT_LINE_SIZE_KIB,
                         instance.line_size_kib)
        self.assertEqual('alru', values[(P.CLEANING, 'policy')])
        self.assertEqual(cleaning['wake_up_s'],
                         values[(P.CLEANING_ALRU, 'wake_up_s')])
        self.assertEqual(cleaning['dirty_ratio_threshold_pct'], values[
            (P.CLEANING_ALRU, 'dirty_ratio_threshold_pct')])
        self.assertEqual(data.SEQ_CUTOFF_KIB,
                         values[(P.SEQ_CUTOFF, 'threshold_kib')])
        wt = self.values(data.Stack('cas-wt', 'cas', 'wt').instance_layout(
            1, '/dev/ram0'))
        self.assertEqual(layout_file.CLEAN_DEFAULTS[P.PROMOTION]['policy'],
                         wt[(P.PROMOTION, 'policy')])

    def test_a_variant_changes_only_what_it_names(self):
        stack = data.parse_variant(
            'cas-wb-64k=wb:line_size_kib=64,cleaning.wake_up_s=1')
        self.assertEqual(('cas-wb-64k', 'cas', 'wb', 'alru'),
                         (stack.name, stack.kind, stack.mode, stack.cleaning))
        instance = stack.instance_layout(1, '/dev/ram0')
        values = self.values(instance)
        self.assertEqual(64, instance.line_size_kib)
        self.assertEqual(1, values[(P.CLEANING_ALRU, 'wake_up_s')])
        # the other alru parameters keep the product's defaults
        self.assertEqual(
            layout_file.DIRTY_DEFAULTS[P.CLEANING]['staleness_s'],
            values[(P.CLEANING_ALRU, 'staleness_s')])
        document = stack.layout_document(2, '/dev/ram0')
        self.assertEqual({'id': 2, 'mode': 'wb', 'device': '/dev/ram0',
                          'line_size_kib': 64,
                          'cleaning': {'wake_up_s': 1}},
                         document['instances'][0])

    def test_each_default_variant_changes_one_default(self):
        for text in data.DEFAULT_VARIANTS:
            stack = data.parse_variant(text)
            product = self.values(data.Stack(
                'cas-' + stack.mode, 'cas', stack.mode).instance_layout(
                    1, '/dev/ram0'))
            instance = stack.instance_layout(1, '/dev/ram0')
            changed = {key for key, value in self.values(instance).items()
                       if product.get(key) != value}
            if instance.line_size_kib != layout_file.DEFAULT_LINE_SIZE_KIB:
                changed.add('line size')
            self.assertTrue(changed, text)
            # one section each: the row's difference has one cause
            self.assertEqual(1, len({key[0].split('-')[0] if key != 'line '
                                     'size' else key for key in changed}),
                             (text, changed))

    def test_another_policy_gets_open_cas_own_parameters(self):
        stack = data.parse_variant(data.DEFAULT_VARIANTS[0])
        self.assertEqual('acp', stack.cleaning)
        values = self.values(stack.instance_layout(1, '/dev/ram0'))
        self.assertEqual('acp', values[(P.CLEANING, 'policy')])
        self.assertFalse([key for key in values
                          if key[0] == P.CLEANING_ALRU])

    def test_variants_sit_next_to_the_products_stack_of_their_mode(self):
        cut = data.parse_variant('cas-wb-never=wb:seq_cutoff.policy=never')
        self.assertEqual('never', self.values(cut.instance_layout(
            1, '/dev/ram0'))[(P.SEQ_CUTOFF, 'policy')])
        names = [stack.name for stack in data.stacks(
            [data.parse_variant('cas-wt-always=wt:promotion.policy=always'),
             data.parse_variant('cas-wb-16k=wb:line_size_kib=16')])]
        self.assertEqual(['krbd', 'cas-wb', 'cas-wb-16k', 'bcache-wb',
                          'dmcache-wb', 'dmwritecache', 'cas-wt',
                          'cas-wt-always', 'bcache-wt', 'dmcache-wt'], names)

    def test_bad_variants_are_refused_before_any_io(self):
        for text in ('cas-wb', 'cas-wb=xx', 'wb-x=wb', 'cas-x=wb:color=red',
                     'cas-x=wb:cleaning.wake_up_s', 'cas-x=wb:io.x=1',
                     'cas-x=wb:seq-cutoff.policy=never'):
            self.assertRaises(ValueError, data.parse_variant, text)
        for text in ('cas-x=wb:line_size_kib=3',
                     'cas-x=wb:cleaning.wake_up_s=-1',
                     'cas-x=wb:cleaning.policy=fifo'):
            self.assertRaises(exception.HostLayoutInvalid,
                              data.parse_variant, text)


class RunCaseTest(testtools.TestCase):
    """benchmarks/peers.run_case with fio and the block device mocked."""

    class Counting(object):
        """A stack whose counters advance only once settled (bcache)."""

        def __init__(self):
            self.stack = data.Stack('fake', 'bcache', 'wb')
            self.path = '/dev/fake'
            self.settled = 0
            self.counts = (0, 0)

        def set_cleaning(self, running):
            pass

        def dirty_bytes(self):
            return None

        def settle_counters(self):
            self.settled += 1
            self.counts = (self.counts[0] + 90, self.counts[1] + 100)

        def read_counters(self):
            return self.counts

    def _run(self, case):
        with open(SAMPLE) as source:
            fio = source.read()
        device = self.Counting()
        args = mock.Mock(image_mb=128, range_mb=16, runtime=1)
        with mock.patch.object(peers, 'run', return_value=fio), \
                mock.patch.object(peers, 'sectors', return_value=2 ** 20):
            return device, peers.run_case(device, case, args, 0.0)

    def test_a_read_case_counts_what_settled_after_it(self):
        device, result = self._run(data.Case('hit', 'randread'))
        self.assertEqual(1, device.settled)
        self.assertEqual(0.9, result['read_hit_ratio'])

    def test_a_write_case_has_no_read_hit_ratio(self):
        _device, result = self._run(data.Case('w', 'randwrite'))
        self.assertNotIn('read_hit_ratio', result)


class OperatorHostTest(testtools.TestCase):
    """The run outside the guest: options it needs, what it refuses."""

    def args(self, *argv):
        parser = {}

        def capture(args):
            parser['args'] = args
            return 0
        with mock.patch.object(peers, 'run_guest', capture):
            peers.main(['run'] + list(argv))
        return parser['args']

    def test_outside_the_guest_every_host_option_is_needed(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_BRICK_CAS_KERNEL_GUEST'))
        error = self.assertRaises(SystemExit, peers.target_of,
                                  self.args('--cache-device', '/dev/x'))
        self.assertIn('--metadata-device, --pool, --rbd-user', str(error))
        target = peers.target_of(self.args(
            '--cache-device', '/dev/nvme0n1p5', '--metadata-device',
            '/dev/nvme0n1p6', '--pool', 'bench', '--rbd-user', 'cinder'))
        self.assertFalse(target.in_guest)
        self.assertEqual(peers.HOST_CACHE_ID, target.cache_id)
        # never the host's own opencas.conf
        self.assertNotEqual(peers.kernel_bench.OPENCAS_CONF,
                            target.opencas_conf)
        self.assertIn('/dev/nvme0n1p5', target.label)
        self.assertNotIn('TCG', target.label)

    def test_in_the_guest_the_ram_disks(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_BRICK_CAS_KERNEL_GUEST', '1'))
        target = peers.target_of(self.args())
        self.assertTrue(target.in_guest)
        self.assertEqual(('/dev/ram0', 1), (target.cache_dev,
                                            target.cache_id))
        self.assertIn('TCG', target.label)

    def test_sizes_follow_the_cache_on_a_host(self):
        args = self.args()
        peers.sizes(args, 8192)
        self.assertEqual((2048, 16384), (args.range_mb, args.image_mb))
        args = self.args('--range-mb', '100')
        peers.sizes(args, 64)
        self.assertEqual((100, 128), (args.range_mb, args.image_mb))

    def test_devices_not_agreed_or_not_block_devices_are_refused(self):
        regular = self.useFixture(fixtures.TempDir()).join('file')
        open(regular, 'w').close()
        target = peers.Target(cache_dev=regular, metadata_dev='/nonexistent',
                              ceph_conf='/nonexistent', pool='p',
                              rbd_user='u', cache_id=7)
        with mock.patch.object(peers, 'MODULES', ()), \
                mock.patch.object(peers, 'TOOLS', ()), \
                mock.patch.object(peers.shutil, 'which', return_value=None):
            missing = peers.check_prerequisites(target, [])
        text = '\n'.join(missing)
        self.assertIn('%s is not a block device' % regular, text)
        self.assertIn('block device /nonexistent missing', text)
        self.assertIn('Ceph configuration /nonexistent missing', text)

    def test_a_block_device_must_be_named_in_wipe_and_free(self):
        target = peers.Target(cache_dev='/dev/null', metadata_dev='/dev/zero',
                              ceph_conf='/nonexistent', pool='p',
                              rbd_user='u')
        with mock.patch.object(peers, 'MODULES', ()), \
                mock.patch.object(peers, 'TOOLS', ()), \
                mock.patch.object(peers.stat, 'S_ISBLK', return_value=True), \
                mock.patch.object(peers, 'device_in_use',
                                  side_effect=[['/dev/null is in use'], []]), \
                mock.patch.object(peers.shutil, 'which', return_value=None):
            missing = peers.check_prerequisites(target, ['/dev/zero'])
        self.assertIn('/dev/null is in use', missing)
        self.assertIn('/dev/null is wiped by the run: name it in --wipe to '
                      'agree', missing)
        self.assertFalse([line for line in missing
                          if line.startswith('/dev/zero is wiped')])

    def test_an_instance_id_in_use_is_refused(self):
        # casadm -L -o csv as v26.03.2 prints it (casadm-samples 040)
        listing = ('type,id,disk,status,write policy,device\n'
                   'cache,7,/dev/nvme0n1p2,Running,wb,-\n'
                   'core,1,/dev/rbd0,Active,-,/dev/cas7-1\n')
        target = peers.Target(cache_dev='/nonexistent-a',
                              metadata_dev='/nonexistent-b',
                              ceph_conf='/nonexistent', pool='p',
                              rbd_user='u', cache_id=7)

        def which(tool):
            return '/usr/sbin/casadm' if tool == 'casadm' else None
        done = mock.Mock(stdout=listing, stderr='', returncode=0)
        with mock.patch.object(peers, 'MODULES', ()), \
                mock.patch.object(peers, 'TOOLS', ()), \
                mock.patch.object(peers.shutil, 'which', which), \
                mock.patch.object(peers.subprocess, 'run',
                                  return_value=done) as run:
            missing = peers.check_prerequisites(target, [])
            free = peers.check_prerequisites(
                dataclasses.replace(target, cache_id=16384), [])
        self.assertIn('Open CAS instance 7 runs here: choose a free '
                      '--cache-id', missing)
        self.assertFalse([line for line in free if 'runs here' in line])
        run.assert_any_call(['casadm', '-L', '-o', 'csv'],
                            capture_output=True, text=True)


class SummaryTest(testtools.TestCase):
    """The summary table README and the tuning guide show."""

    @staticmethod
    def entry(name, **drain):
        return {'stack': name, 'drain': drain, 'cases': [
            {'case': 'hit-randread-qd1', 'cpu_us_per_io': 99.4,
             'read_hit_ratio': 1.0,
             'read': {'avg_us': 77.2, 'p99_us': 326.0, 'iops': 11401.0}},
            {'case': 'hit-randread-qd16',
             'read': {'avg_us': 1720.0, 'p99_us': 6849.0, 'iops': 9219.0}},
            {'case': 'read-while-cleaning', 'read_hit_ratio': 0.74,
             'read': {'avg_us': 114.0, 'p99_us': 586.0, 'iops': 7769.0},
             'dirty': [[1.0, 3 * 2 ** 20], [2.0, 25 * 2 ** 20]]}]}

    def test_cells(self):
        entry = self.entry('cas-wb', dirty_bytes=1, seconds=24.97)
        cell = data.summary_cell
        self.assertEqual('77', cell(entry, 'hit-randread-qd1', 'avg'))
        self.assertEqual('99', cell(entry, 'hit-randread-qd1', 'cpu'))
        self.assertEqual('9.2', cell(entry, 'hit-randread-qd16', 'kiops'))
        self.assertEqual('25', cell(entry, 'read-while-cleaning', 'dirty'))
        self.assertEqual('74', cell(entry, 'read-while-cleaning', 'hit'))
        self.assertEqual('-', cell(entry, 'randwrite-qd1', 'avg'))
        self.assertEqual('-', cell(entry, 'hit-randread-qd16', 'hit'))
        self.assertEqual('25', cell(entry, None, 'drain'))
        timed_out = self.entry('x', dirty_bytes=5, seconds=None, timeout=300)
        self.assertEqual('>300', cell(timed_out, None, 'drain'))
        self.assertEqual('-', cell({'stack': 'krbd', 'drain': {}}, None,
                                   'drain'))

    def test_table_is_an_rst_simple_table_a_row_a_stack(self):
        document = {'stacks': [self.entry('cas-wb', seconds=25.0),
                               self.entry('bcache-wb', seconds=5.0),
                               {'stack': 'broken', 'error': 'x'}, {}]}
        lines = data.summary_table(document).splitlines()
        self.assertEqual(lines[0], lines[2])
        self.assertEqual(lines[0], lines[-1])
        self.assertEqual(len(data.SUMMARY) + 1, len(lines[0].split()))
        self.assertTrue(lines[1].startswith('stack'))
        self.assertEqual(['cas-wb', 'bcache-wb', 'broken'],
                         [line.split()[0] for line in lines[3:-1]])
        self.assertIn('77', lines[3].split())
        only = data.summary_table(document, ['bcache-wb']).splitlines()
        self.assertEqual(5, len(only))

    def test_plot_draws_the_png_and_writes_the_summary(self):
        try:
            import matplotlib   # noqa: F401
        except ImportError:
            self.skipTest('matplotlib not installed')
        directory = self.useFixture(fixtures.TempDir()).path
        source = os.path.join(directory, 'peers.json')
        with open(source, 'w') as out:
            json.dump({'where': 'a TCG guest', 'kernel': '6.1',
                       'stacks': [self.entry('cas-wb', seconds=25.0)]}, out)
        self.assertEqual(0, peers.main(['plot', source, directory]))
        with open(os.path.join(directory, 'peers.png'), 'rb') as png:
            self.assertEqual(b'\x89PNG', png.read(4))
        with open(os.path.join(directory, 'peers-summary.rst')) as table:
            self.assertIn('cas-wb', table.read())
