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

"""``bench --plot``: the figure drawn from real fio output."""

import contextlib
import io
import os
import sys
from unittest import mock

import fixtures
import testtools

from os_brick_cas import bench
from os_brick_cas import benchplot
from os_brick_cas.cmd import main as cli_main

SAMPLE = os.path.join(os.path.dirname(__file__), 'data',
                      'fio_randrw70_qd1.json')


def results() -> list[dict]:
    """Two runs on a cached and an uncached device (fio's real output)."""
    with open(SAMPLE) as sample:
        parsed = bench.parse_fio(sample.read())
    out = []
    for run, ratio in ((1, 0.1), (2, 0.9)):
        for device, hits in (('ceph', None), ('cas', ratio)):
            item = {'profile': 'randrw70-qd1 #%d' % run, 'device': device,
                    'run': run, 'read_hit_ratio': hits}
            item.update(parsed)
            out.append(item)
    return out


class PlotTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_percentiles_and_warmup_drawn(self):
        try:
            benchplot.require()
        except benchplot.PlotUnavailable:
            self.skipTest('matplotlib not installed')
        path = os.path.join(self.tmp, 'bench.png')
        figure = benchplot.plot(results(), path, 'test host')
        with open(path, 'rb') as png:
            self.assertEqual(b'\x89PNG', png.read(4))
        latency, warmup = figure.axes
        lines = {line.get_label(): list(line.get_ydata())
                 for line in latency.get_lines()}
        with open(SAMPLE) as sample:
            read = bench.parse_fio(sample.read())['read']
        self.assertEqual(
            {'randrw70-qd1 %s %s' % (direction, device)
             for direction in ('read', 'write')
             for device in ('ceph', 'cas')}, set(lines))
        self.assertEqual([read.avg_us, read.p99_us, read.p999_us,
                          read.p9999_us], lines['randrw70-qd1 read cas'])
        [warm] = warmup.get_lines()
        self.assertEqual(('randrw70-qd1 cas', [1, 2], [10.0, 90.0]), (
            warm.get_label(), list(warm.get_xdata()),
            list(warm.get_ydata())))

    def test_cold_and_warm_runs_get_lines_of_their_own(self):
        items = results()
        for item, phase in zip(items, ('cold', 'cold', 'warm', 'warm')):
            item['phase'] = phase
        warming = dict(items[1], profile='randrw70-qd1 #3', run=3,
                       phase='warming')
        series = benchplot.latency_series(items + [warming])
        self.assertEqual(
            {'randrw70-qd1 %s %s %s' % (phase, direction, device)
             for phase in ('cold', 'warm')
             for direction in ('read', 'write')
             for device in ('ceph', 'cas')}, set(series))
        self.assertEqual([(1, 0.1), (2, 0.9), (3, 0.1)],
                         benchplot.warmup_series(items + [warming])[
                             'randrw70-qd1 cas'])

    def test_drain_line_joins_the_medians_per_policy(self):
        try:
            benchplot.require()
        except benchplot.PlotUnavailable:
            self.skipTest('matplotlib not installed')
        rows = [{'policy': policy, 'written': written,
                 'dirty_before': dirty, 'seconds': seconds}
                for policy, written, dirty, seconds in (
                    ('nop', 1024, 1024, 1.0), ('nop', 1024, 1024, 5.0),
                    ('nop', 1024, 1024, 2.0), ('nop', 4096, 4096, 5.0),
                    ('acp', 4096, 2048, 0.5))]
        path = os.path.join(self.tmp, 'drain.png')
        figure = benchplot.plot_drain(rows, path, 'test host')
        with open(path, 'rb') as png:
            self.assertEqual(b'\x89PNG', png.read(4))
        [axes] = figure.axes
        lines = {line.get_label(): (list(line.get_xdata()),
                                    list(line.get_ydata()))
                 for line in axes.get_lines()}
        # MiB at drain start; the median of the three 1024-block runs
        self.assertEqual({'nop': ([4.0, 16.0], [2.0, 5.0]),
                          'acp': ([8.0], [0.5])}, lines)

    def test_without_matplotlib_refused_before_fio_runs(self):
        # in place: the import system reads this very dict
        hidden = mock.patch.dict(sys.modules, {'matplotlib': None})
        hidden.start()
        self.addCleanup(hidden.stop)
        fio = self.useFixture(fixtures.MockPatch(
            'os_brick_cas.cmd.bench.processutils.execute'))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli_main.main([
                'bench', '--device', os.path.join(self.tmp, 'file'),
                '--profiles', 'randread-qd1', '--plot',
                os.path.join(self.tmp, 'x.png')])
        self.assertEqual(2, code)
        self.assertIn('pip install "os-brick-cas[plot]"', err.getvalue())
        fio.mock.assert_not_called()
