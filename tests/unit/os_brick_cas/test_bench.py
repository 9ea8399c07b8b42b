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

"""fio argv, fio JSON parsing and the reference table."""

import json
import os

import fixtures
import testtools

from os_brick_cas import bench
from os_brick_cas.cmd import bench as cmd_bench
from os_brick_cas import rbd_names
from os_brick_cas import report
from tests.unit.os_brick_cas import base as unit_base

DATA = os.path.join(os.path.dirname(__file__), 'data')
# a real fio 3.33 run of the randrw70-qd1 profile on this machine
SAMPLE = os.path.join(DATA, 'fio_randrw70_qd1.json')


class FioArgvTestCase(testtools.TestCase):

    def test_reference_settings(self):
        profile = {p.name: p for p in bench.PROFILES}['randrw70-qd16']
        argv = bench.fio_argv(profile, '/dev/cas1-1', 30)
        for option in ('--bs=4k', '--iodepth=16', '--ioengine=libaio',
                       '--direct=1', '--time_based', '--runtime=30',
                       '--rw=randrw', '--rwmixread=70',
                       '--filename=/dev/cas1-1', '--lat_percentiles=1',
                       '--output-format=json'):
            self.assertIn(option, argv)
        self.assertEqual('fio', argv[0])

    def test_profiles_cover_the_reference_matrix(self):
        self.assertEqual(
            {(rw, depth) for rw in ('randread', 'randwrite', 'randrw')
             for depth in (1, 16)},
            {(p.rw, p.iodepth) for p in bench.PROFILES})


class ParseFioTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        with open(SAMPLE) as sample:
            self.text = sample.read()
        self.job = json.loads(self.text)['jobs'][0]

    def test_total_latency_in_microseconds_and_iops(self):
        result = bench.parse_fio(self.text)
        for name in ('read', 'write'):
            lat = self.job[name]['lat_ns']
            self.assertAlmostEqual(lat['mean'] / 1000.0,
                                   result[name].avg_us)
            self.assertEqual(lat['percentile']['99.990000'] / 1000.0,
                             result[name].p9999_us)
            self.assertAlmostEqual(self.job[name]['iops'],
                                   result[name].iops)
            # total latency, not completion latency
            self.assertNotEqual(self.job[name]['clat_ns']['mean'] / 1000.0,
                                result[name].avg_us)

    def test_warnings_before_the_json_are_skipped(self):
        result = bench.parse_fio('fio: file hash not empty on exit\n' +
                                 self.text)
        self.assertEqual({'read', 'write'}, set(result))

    def test_failed_job_is_an_error(self):
        document = json.loads(self.text)
        document['jobs'][0]['error'] = 5
        self.assertRaises(ValueError, bench.parse_fio, json.dumps(document))

    def test_table_has_ratio_rows_for_two_devices(self):
        parsed = bench.parse_fio(self.text)
        slower = {name: bench.Direction(
            iops=d.iops / 4, avg_us=d.avg_us * 4, p99_us=d.p99_us * 4,
            p999_us=d.p999_us * 4, p9999_us=d.p9999_us * 4)
            for name, d in parsed.items()}
        table = bench.render_table(
            [dict(profile='randrw70-qd1', device='ceph', **slower),
             dict(profile='randrw70-qd1', device='cas', **parsed)],
            ['ceph', 'cas'])
        ratios = [line.split() for line in table.splitlines()
                  if line.split()[:1] == ['ratio']]
        self.assertEqual([['ratio'] + ['4.0x'] * 5] * 2, ratios)


class ReportHelpersTestCase(testtools.TestCase):

    def test_cinder_volume_from_by_id_name(self):
        volume = '0d6c3a4e-3c5b-4d5e-9f1a-2b3c4d5e6f70'
        self.assertEqual(
            ('my-pool/volume-' + volume, volume),
            report.rbd_image_of('/dev/disk/by-id/rbd-my-pool-volume-' +
                                volume))

    def test_other_devices_are_not_volumes(self):
        for path in ('/dev/disk/by-id/nvme-a-part1',
                     '/dev/disk/by-id/rbd-volumes-scratch',
                     '/tmp/rbd-volumes-volume-0d6c3a4e-3c5b-4d5e-9f1a-'
                     '2b3c4d5e6f70'):
            self.assertEqual((None, None), report.rbd_image_of(path))

    def test_operator_names_a_core_by_volume_id_or_image(self):
        volume = '0d6c3a4e-3c5b-4d5e-9f1a-2b3c4d5e6f70'
        spec = rbd_names.ImageSpec(
            pool='volumes', namespace='tenant-a', image='volume-' + volume,
            fsid=rbd_names.normal_fsid('5b3c8a52-8f0e-4bd6-9a3e-0a1b2c3d4e5f'))
        device = '/dev/disk/by-id/' + spec.link_name()
        for name in (volume, 'volumes/tenant-a/volume-' + volume):
            self.assertTrue(report.names_volume(device, name), name)
        for name in ('', volume[:-1] + '1', 'volumes/volume-' + volume,
                     'tenant-a'):
            self.assertFalse(report.names_volume(device, name), name)
        legacy = '/dev/disk/by-id/rbd-volumes-volume-' + volume
        self.assertTrue(report.names_volume(legacy, volume))
        self.assertFalse(report.names_volume('/dev/rbd0', volume))

    def test_hit_ratio(self):
        self.assertEqual(0.25, report.hit_ratio(
            {'Read hits [Requests]': '5', 'Read total [Requests]': '20'},
            'Read'))
        self.assertIsNone(report.hit_ratio(
            {'Read hits [Requests]': '0', 'Read total [Requests]': '0'},
            'Read'))

    def test_hit_ratio_counts_passed_through_requests_as_misses(self):
        # casadm's "Read total" leaves out pass-through reads (e.g. a
        # sequential scan over the cut-off): they reached Ceph
        stats = {'Read hits [Requests]': '10', 'Read total [Requests]': '10',
                 'Pass-Through reads [Requests]': '990',
                 'Write hits [Requests]': '3',
                 'Write total [Requests]': '4',
                 'Pass-Through writes [Requests]': '4'}
        self.assertEqual(0.01, report.hit_ratio(stats, 'Read'))
        self.assertEqual(3 / 8, report.hit_ratio(stats, 'Write'))
        self.assertEqual((10, 1000), report.requests_of(stats, 'Read'))
        self.assertIsNone(report.hit_ratio(
            {'Read hits [Requests]': '0', 'Read total [Requests]': '0',
             'Pass-Through reads [Requests]': '0'}, 'Read'))
        self.assertEqual(0.0, report.hit_ratio(
            {'Read hits [Requests]': '0', 'Read total [Requests]': '0',
             'Pass-Through reads [Requests]': '7'}, 'Read'))


class RepeatedRunsTestCase(unit_base.TestCase):
    """--repeat: each run's own read hit ratio (fio and casadm faked)."""

    def test_hit_ratio_per_run_from_counter_deltas(self):
        casadm = self.useFixture(unit_base.FakeCasadm())
        counters = iter([(0, 0), (10, 100), (10, 100), (100, 200)])

        def stats(argv):
            hits, total = next(counters)
            return (0, 'Read hits [Requests],Read total [Requests]\n'
                       '%d,%d\n' % (hits, total), '')
        casadm.reply(r'--stats --cache-id 1 --core-id 2', stats)
        with open(SAMPLE) as sample:
            fio_out = sample.read()

        def execute(binary, *args, **kwargs):
            # fio and casadm share processutils.execute: route by binary
            if binary == 'fio':
                return fio_out, ''
            return casadm._execute(binary, *args, **kwargs)
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.cmd.bench.processutils.execute',
            side_effect=execute))
        results = cmd_bench.run_profiles(
            [('cas', '/dev/cas1-2')],
            [{p.name: p for p in bench.PROFILES}['randrw70-qd1']], 1, None,
            repeat=2)
        self.assertEqual([('randrw70-qd1 #1', 0.1), ('randrw70-qd1 #2', 0.9)],
                         [(r['profile'], r['read_hit_ratio'])
                          for r in results])
