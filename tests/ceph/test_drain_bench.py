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

"""benchmarks/drain.py runs on a real RBD image, and its report is sane.

Small run (two dirty sizes, a few writes) on the tier's shared cluster.
Counts are asserted (flushed == written, drained core ends clean, cached
writes stay dirty); timings are only checked to be numbers, never
compared with a bound. The report is written to ``CEPH_BENCH_DRAIN_OUTPUT``
(default .ceph-bench-drain.txt) for the CI log.
"""

import glob
import os
import subprocess
import sys
import tempfile

import testtools

from tests.ceph import base
from tests import real_ceph

SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'benchmarks',
                      'drain.py')
LABEL = '-- userspace stand-in over loopback Ceph, not a hardware figure'
DIRTY = (256, 1024)
WRITES = 40


def parse(line: str) -> tuple[str, dict[str, str]]:
    """``kind k=v ... -- LABEL`` -> (kind, {k: v})."""
    body = line[:-len(LABEL)].split()
    return body[0], dict(item.split('=', 1) for item in body[1:])


class DrainBenchTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        real_ceph.skip_or_fail(self)
        self.cluster = base.shared_cluster()

    @staticmethod
    def work_dirs() -> set[str]:
        return set(glob.glob(os.path.join(tempfile.gettempdir(),
                                          'os-brick-cas-drain-bench-*')))

    def test_small_run_reports_sane_figures(self):
        output = os.environ.get('CEPH_BENCH_DRAIN_OUTPUT',
                                '.ceph-bench-drain.txt')
        dirs_before = self.work_dirs()
        result = subprocess.run(
            [sys.executable, SCRIPT, '--dirty',
             ','.join(str(size) for size in DIRTY), '--writes', str(WRITES),
             '--ceph-conf', self.cluster.conf, '--output', output],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, result.returncode, result.stderr[-2000:])
        with open(output) as report:
            self.assertEqual(result.stdout, report.read())
        lines = result.stdout.splitlines()
        self.assertIn('not a hardware figure', lines[0])
        figures = []
        for line in lines[1:]:
            if not line.startswith('#'):
                self.assertTrue(line.endswith(LABEL), line)
                figures.append(parse(line))
        drains = [values for kind, values in figures if kind == 'drain']
        writes = {values['core']: values for kind, values in figures
                  if kind == 'write4k'}
        self.assertEqual(len(DIRTY) + len(writes), len(figures))
        self.assertEqual(list(DIRTY), [int(row['written'])
                                       for row in drains])
        for row in drains:
            # every written block was dirty, and the drain flushed them all
            self.assertEqual(row['written'], row['dirty_before'], row)
            self.assertEqual(row['written'], row['flushed'], row)
            self.assertEqual('0', row['dirty_after'], row)
            self.assertGreater(float(row['seconds']), 0)
            self.assertGreater(float(row['blocks_per_s']), 0)
        self.assertEqual({'cached', 'drained'}, set(writes))
        for state, row in writes.items():
            self.assertEqual(WRITES, int(row['writes']))
            p50, p99, peak = (float(row[key]) for key in
                              ('p50_us', 'p99_us', 'max_us'))
            self.assertTrue(0 < p50 <= p99 <= peak, row)
            self.assertGreater(float(row['avg_us']), 0)
        # write-back keeps each distinct write dirty; drained writes none
        self.assertEqual(WRITES, int(writes['cached']['dirty_after']))
        self.assertEqual('0', writes['drained']['dirty_after'])
        # it cleans up: no work dir, no image, no /dev/casX-Y left
        self.assertEqual(dirs_before, self.work_dirs())
        self.assertNotIn('volume-drain-bench-',
                         self.cluster.rbd('ls', base.POOL))
        self.assertEqual([], glob.glob('/dev/cas9-*'))
