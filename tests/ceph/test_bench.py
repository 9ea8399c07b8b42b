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

"""``os-brick-cas bench`` on a real RBD-backed block device.

Runs the seed-style table for a few seconds on the raw mapped RBD device
and on the /dev/casX-Y of the same volume. The table is written to
``CEPH_BENCH_OUTPUT`` (default .ceph-bench.txt) so the CI log can show it:
it is loopback memstore Ceph through rbd-fuse + loop on the CI machine,
with the userspace data-true Open CAS stand-in (FUSE + loop, metadata
synced on every write) -- not a hardware figure.
"""

import contextlib
import io
import json
import math
import os

from os_brick_cas import bench
from os_brick_cas.cmd import main as cli
from os_brick_cas import report
from tests.ceph import base

WHERE = ('loopback memstore Ceph via rbd-fuse + loop on this CI machine; '
         'Open CAS is the userspace stand-in over loopback Ceph -- NOT a '
         'hardware figure')


class BenchOnRealRbdTestCase(base.CephTestCase):

    def cli(self, *argv: str) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(list(argv))
        return code, out.getvalue()

    def test_bench_table_on_rbd_and_cas_device_of_one_volume(self):
        volume = self.create('wt')
        data, device = self.attach(volume)
        self.addCleanup(self.connector.disconnect_volume, data, device)
        rbd_path = '/dev/rbd/%s/%s' % (base.POOL, volume.name)
        argv = ['bench', '--device', 'ceph=' + rbd_path, '--device',
                'cas=' + device['path'], '--runtime',
                os.environ.get('CEPH_BENCH_RUNTIME', '2'), '--destroy-data',
                # the first 64 MiB only: memstore keeps every written
                # byte in the OSD's RAM and blocks writes when full
                '--size', '64M',
                '--profiles', 'randread-qd1,randwrite-qd1,randrw70-qd16',
                '--where', WHERE]
        code, table = self.cli(*argv)
        self.assertEqual(0, code)
        self.assertIn('NOT a hardware figure', table)
        with open(os.environ.get('CEPH_BENCH_OUTPUT', '.ceph-bench.txt'),
                  'w') as output:
            output.write(table)
        code, text = self.cli(*(argv + ['-f', 'json']))
        self.assertEqual(0, code)
        results = json.loads(text)['results']
        self.assertEqual(6, len(results))
        for result in results:
            for direction in ('read', 'write'):
                if direction in result:
                    self.assertGreater(result[direction]['iops'], 0)
        # the bench wrote through the device: Ceph has non-zero data now
        # (in the first 64 MiB, the only part fio was given)
        written = self.read_from_ceph(volume.name, 0, 64 * 2 ** 20)
        self.assertNotEqual(bytes(len(written)), written)

    def test_stand_in_cache_warms_up_and_wb_holds_the_writes(self):
        """A real cache effect of the data-true stand-in (not hardware)."""
        wt_volume, wb_volume = self.create('wt'), self.create('wb')
        wt_data, wt_device = self.attach(wt_volume)
        self.addCleanup(self.connector.disconnect_volume, wt_data, wt_device)
        wb_data, wb_device = self.attach(wb_volume)
        self.addCleanup(self.connector.disconnect_volume, wb_data, wb_device)
        rbd_path = '/dev/rbd/%s/%s' % (base.POOL, wt_volume.name)
        # 8 MiB fits the 16 MiB cache instance: each run's hit ratio rises
        common = ['--runtime', '1', '--size', '8M', '--where', WHERE]
        reads = ['bench', '--device', 'ceph=' + rbd_path, '--device',
                 'cas=' + wt_device['path'], '--profiles', 'randread-qd1',
                 '--repeat', '4'] + common
        writes = ['bench', '--device', 'cas-wt=' + wt_device['path'],
                  '--device', 'cas-wb=' + wb_device['path'], '--profiles',
                  'randwrite-qd1', '--destroy-data'] + common
        reads_out = self.bench_json(reads)
        writes_out = self.bench_json(writes)
        with open(os.environ.get('CEPH_BENCH_CACHE_OUTPUT',
                                 '.ceph-bench-cache.txt'), 'w') as output:
            output.write(self.table(reads_out, ['ceph', 'cas']) +
                         self.table(writes_out, ['cas-wt', 'cas-wb']))
        cas_runs = [item for item in reads_out['results']
                    if item['device'] == 'cas']
        ratios = [item['read_hit_ratio'] for item in cas_runs]
        # cold cache first, then the runs find what earlier runs promoted
        self.assertEqual(4, len(ratios))
        self.assertLess(ratios[0], ratios[-1], ratios)
        # how warm the last run must be follows from how many reads came
        # before it (fio's runs are timed: a loaded machine reads less):
        # uniform random 4 KiB reads with replacement over 8 MiB, each
        # miss promoted, leave 1 - exp(-reads / blocks) of it cached, and
        # the last run hits at least that part (nothing is evicted)
        earlier_reads = sum(item['read']['iops'] for item in cas_runs[:-1])
        cached = 1 - math.exp(-earlier_reads * 1 / (8 * 2 ** 20 / 4096))
        self.assertGreater(ratios[-1], 0.9 * cached,
                           (ratios, earlier_reads, cached))
        # where the writes went: wb holds them dirty, wt wrote them through
        # (latencies are in the table; on loopback memstore Ceph a wt write
        # is about as fast as the stand-in's synced cache-file write)
        self.assertEqual({'cas-wt', 'cas-wb'}, {
            item['device'] for item in writes_out['results']
            if item['write']['iops'] > 0})
        self.assertEqual(0, self.dirty_blocks(wt_device['path']))
        self.assertGreater(self.dirty_blocks(wb_device['path']), 0)

    def bench_json(self, argv: list[str]) -> dict:
        code, text = self.cli(*(argv + ['-f', 'json']))
        self.assertEqual(0, code)
        return json.loads(text)

    @staticmethod
    def table(out: dict, labels: list[str]) -> str:
        """The bench table (as the CLI prints it) of a -f json run."""
        results = [{key: bench.Direction(**value)
                    if key in ('read', 'write') else value
                    for key, value in item.items()}
                   for item in out['results']]
        per_run = ', '.join(
            '%s %s' % (item['profile'], report.percent(item[
                'read_hit_ratio'])) for item in out['results']
            if item['read_hit_ratio'] is not None)
        return ('bench, %ss per run; measured on: %s\n%s%s\n' % (
            out['runtime_s'], out['where'],
            bench.render_table(results, labels),
            'read hit ratio per run: ' + per_run if per_run else ''))
