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

"""Operators see cache shares: status, the exporter, doctor, reload.

Issue 35 points 2 and 3 on the host simulator: what a volume asked for,
what it holds (or lost to the IO-class budget), its class's occupancy and
dirty blocks against its cap from ``casadm -P -i I -d`` (one call per
instance), doctor's finding for a table that differs from the shares and
drains, and ``reload-io-classes`` that repairs it under the drain's locks.
"""

import json
import math
import os
import subprocess
import uuid

from os_brick_cas import casadm
from os_brick_cas import drain
from os_brick_cas.metrics import exporter
from os_brick_cas.metrics import opts as metrics_opts
from os_brick_cas.opencas import casadm_output
from tests.functional import test_cli
from tests.functional import test_metrics

HEADER = 'IO class id,IO class name,Eviction priority,Allocation\n'
BLOCK = 4096
VOL_A = str(uuid.UUID(int=0x35a))
VOL_B = str(uuid.UUID(int=0x35b))
VOL_C = str(uuid.UUID(int=0x35c))


class ShareOpsBase(test_cli.CliTestCase):

    def setUp(self):
        super().setUp()
        self.casadm = casadm.Casadm()

    def attach_share(self, volume_id: str, share=None, mode: str = 'wb'):
        extra = {} if share is None else {'cache_share': share}
        props = self.props(self.image('volume-' + volume_id, size_mb=1),
                           mode, volume_id=volume_id, **extra)
        info = self.connector.connect_volume(props)
        self.addCleanup(self._detach_quietly, props)
        [core] = [c for c in self.cores() if volume_id in c.device.replace(
            '%2D', '-')]
        return props, info, core

    def status_cores(self) -> dict[str, dict]:
        code, out, err = self.cli('status', '--format', 'json')
        self.assertEqual(0, code, err)
        return {core['volume_id']: core for cache in json.loads(out)['caches']
                for core in cache['cores']}

    def cap_blocks(self, share: int, cache_id: int = 2) -> int:
        size = int(self.casadm.stats(cache_id)['Cache Size [4KiB Blocks]'])
        return math.ceil(share * size / 100)

    def load_by_hand(self, text: str, cache_id: int = 2) -> None:
        path = os.path.join(self.tmp, 'by-hand.csv')
        with open(path, 'w') as table:
            table.write(text)
        self._tool('casadm', '-C', '-C', '-i', str(cache_id), '-f', path)

    def table(self, cache_id: int = 2) -> str:
        return self._tool('casadm', '--io-class', '--list', '--cache-id',
                          str(cache_id), '--output-format', 'csv')

    def doctor_shares(self) -> list[dict]:
        _code, out, _err = self.cli('doctor', '--format', 'json')
        return [f for f in json.loads(out)['findings']
                if f['check'] == 'shares']


class StatusSharesTestCase(ShareOpsBase):

    def test_status_shows_each_share_asked_held_or_lost(self):
        _pa, _ia, a = self.attach_share(VOL_A, 60)
        self.attach_share(VOL_B, 50)        # 60 + 50 > 100: B loses its
        self.attach_share(VOL_C)
        self.host.set_dirty(2, a.core_id, 40)
        self.host.record_reads(2, a.core_id, total=200, hits=150)
        stats_before = len(self.host.calls(verb='stats'))
        cores = self.status_cores()
        # -P per instance and per core, and one -P -d for the instance
        # whose table holds a share (none for the wt instance, no cores)
        class_stats = [c for c in self.host.calls(verb='stats')[
            stats_before:] if '--io-class-id' in c['argv']]
        self.assertEqual(1, len(class_stats))
        cap = self.cap_blocks(60)
        self.assertEqual(
            (60, 60, 50 + 40, 40, cap),
            tuple(cores[VOL_A][key] for key in (
                'share_asked', 'share_held', 'share_occupancy_blocks',
                'share_dirty_blocks', 'share_cap_blocks')))
        self.assertEqual((50, None, None), tuple(cores[VOL_B][key] for key in (
            'share_asked', 'share_held', 'share_cap_blocks')))
        self.assertEqual((None, None), (cores[VOL_C]['share_asked'],
                                        cores[VOL_C]['share_held']))
        code, out, err = self.cli('status', '--raw')
        self.assertEqual(0, code, err)
        self.assertIn('share: asked 60%%, holds 60%%: 90 of %d cap, 40 dirty'
                      % cap, out)
        self.assertIn('share: asked 50%, holds NONE: the IO-class budget of '
                      'instance 2 is spent', out)
        code, out, err = self.cli('status', '-f', 'value', '-c', 'volume_id',
                                  '-c', 'share_asked', '-c', 'share_held',
                                  '-c', 'share_occupancy_blocks')
        self.assertEqual(0, code, err)
        rows = {line.split()[0]: line.split()[1:]
                for line in out.splitlines()}
        self.assertEqual({VOL_A: ['60', '60', '90'], VOL_B: ['50', '-', '-'],
                          VOL_C: ['-', '-', '-']}, rows)

    def test_status_says_a_drained_share_is_held_back(self):
        _props, _info, core = self.attach_share(VOL_A, 30)
        self.host.set_dirty(2, core.core_id, 7)
        manager = drain.DrainManager(self.casadm)
        [cache] = [c for c in self.casadm.list_caches() if c.cache_id == 2]
        manager.drain(cache, core, 10)
        code, out, err = self.cli('status')
        self.assertEqual(0, code, err)
        self.assertIn('share: asked 30%, held back while drained', out)
        self.assertEqual((30, None), (self.status_cores()[VOL_A][
            'share_asked'], self.status_cores()[VOL_A]['share_held']))


class DoctorSharesTestCase(ShareOpsBase):

    def test_a_table_loaded_by_hand_is_found_and_reload_repairs_it(self):
        _pa, _ia, a = self.attach_share(VOL_A, 30)
        _pb, _ib, b = self.attach_share(VOL_B, 20)
        composed = self.table()
        [ok] = self.doctor_shares()
        self.assertEqual('OK', ok['level'], ok)
        # by hand: A's class caps it at 50%, B's class is gone
        self.load_by_hand(HEADER + '0,unclassified,255,0.5\n'
                          '1,core_id:eq:%d&done,,0.5\n' % a.core_id)
        [found] = self.doctor_shares()
        self.assertEqual(('WARN', 2), (found['level'], found['cache_id']))
        self.assertIn('Run "os-brick-cas reload-io-classes --cache-id 2"',
                      found['message'])
        code, out, err = self.cli('reload-io-classes', '--cache-id', '2')
        self.assertEqual(0, code, err)
        self.assertEqual('cache instance 2: loaded the composed table\n',
                         out)
        self.assertEqual(composed, self.table())
        [ok] = self.doctor_shares()
        self.assertEqual('OK', ok['level'], ok)
        code, out, _ = self.cli('reload-io-classes', '--all')
        self.assertEqual((0, 'cache instance 2: the table was already '
                          'right\n'), (code, out))
        self.assertEqual(b.core_id, self.status_core_id(VOL_B))

    def status_core_id(self, volume_id: str) -> int:
        return self.status_cores()[volume_id]['core_id']

    def test_a_share_lost_to_the_budget_is_named_and_reload_gives_it_back(
            self):
        props_a, info_a, _a = self.attach_share(VOL_A, 60)
        _pb, info_b, b = self.attach_share(VOL_B, 50)
        self.assertIsNone(info_b['cache_share'])
        [lost] = self.doctor_shares()
        self.assertEqual(('WARN', VOL_B, b.core_id),
                         (lost['level'], lost['volume_id'], lost['core_id']))
        self.assertIn('asked for a 50% cache share and gets none',
                      lost['message'])
        # A's detach frees the percent: the table differs from what the
        # shares give now, and the reload hands B its class (no re-attach)
        self.connector.disconnect_volume(props_a, info_a)
        [differs] = self.doctor_shares()
        self.assertIn('reload-io-classes --cache-id 2', differs['message'])
        code, _out, err = self.cli('reload-io-classes', '--cache-id', '2')
        self.assertEqual(0, code, err)
        self.assertEqual(HEADER + '0,unclassified,255,0.50\n'
                         '1,core_id:eq:%d&done,,0.50\n' % b.core_id,
                         self.table())
        self.assertEqual(50, self.status_cores()[VOL_B]['share_held'])

    def test_reload_never_undrains(self):
        _props, _info, core = self.attach_share(VOL_A, 30)
        self.host.set_dirty(2, core.core_id, 9)
        manager = drain.DrainManager(self.casadm)
        [cache] = [c for c in self.casadm.list_caches() if c.cache_id == 2]
        manager.drain(cache, core, 10)
        drained = self.table()
        [ok] = self.doctor_shares()
        self.assertEqual('OK', ok['level'], ok)
        code, out, err = self.cli('reload-io-classes', '--all')
        self.assertEqual(0, code, err)
        self.assertEqual(drained, self.table())
        self.assertTrue(manager.is_drained(2, core.core_id))

    def test_detach_forgets_the_ask(self):
        props, info, _core = self.attach_share(VOL_A, 30)
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], os.listdir(os.path.join(self.tmp, 'shares')))


class ExporterSharesTestCase(ShareOpsBase):

    def setUp(self):
        super().setUp()
        self.conf.config(group=metrics_opts.GROUP, listen_port=0,
                         cache_seconds=0)

    def test_share_gauges_against_the_cap_and_a_lost_share(self):
        _pa, _ia, a = self.attach_share(VOL_A, 60)
        self.attach_share(VOL_B, 50)
        self.host.set_dirty(2, a.core_id, 40)
        self.host.record_reads(2, a.core_id, total=200, hits=150)
        scrape = test_metrics.samples(
            exporter.scrape(exporter.build_registry()))

        def value(name, volume_id):
            return test_metrics.value(scrape, 'os_brick_cas_core_' + name,
                                      volume_id=volume_id)
        self.assertEqual(
            (0.6, 0.6, 0, self.cap_blocks(60) * BLOCK, 90 * BLOCK,
             40 * BLOCK),
            (value('share_ratio', VOL_A), value('share_asked_ratio', VOL_A),
             value('share_lost', VOL_A), value('share_cap_bytes', VOL_A),
             value('share_occupancy_bytes', VOL_A),
             value('share_dirty_bytes', VOL_A)))
        self.assertEqual((0.5, 1), (value('share_asked_ratio', VOL_B),
                                    value('share_lost', VOL_B)))
        self.assertFalse([labels for name, labels in scrape
                          if name == 'os_brick_cas_core_share_ratio' and
                          ('volume_id', VOL_B) in labels])


class StandInClassStatsTestCase(ShareOpsBase):
    """``casadm -P -i I -d [ID] -o csv`` of the stand-in.

    statistics_model.c (v26.03.2): every configured class, or class ID;
    the CSV view prints the header once and a line of values per class.
    No real-kernel golden of this output exists yet.
    """

    def stats(self, *extra: str):
        return self.host_run('casadm', '-P', '-i', '2', '-o', 'csv', '-d',
                             *extra)

    def host_run(self, *argv: str):
        return subprocess.run(list(argv), capture_output=True, text=True,
                              env=os.environ.copy())

    def test_one_line_per_class_and_one_class_by_id(self):
        _props, _info, core = self.attach_share(VOL_A, 30)
        self.host.set_dirty(2, core.core_id, 6)
        every = self.stats()
        self.assertEqual(0, every.returncode, every.stderr)
        rows = casadm_output.parse_io_class_stats(every.stdout)
        self.assertEqual([(0, 'unclassified', 70, 0, 0),
                          (1, 'core_id:eq:%d&done' % core.core_id, 30, 6,
                           6)],
                         [(r.class_id, r.name, r.max_percent,
                           r.occupancy_blocks, r.dirty_blocks)
                          for r in rows])
        header = every.stdout.splitlines()[0].split(',')
        self.assertEqual(['IO class ID', 'IO class name',
                          'Eviction priority', 'Max size',
                          'Occupancy [4KiB Blocks]'], header[:5])
        self.assertNotIn('Free [4KiB Blocks]', header)
        self.assertIn('Pinned', every.stdout.splitlines()[2])
        one = self.stats('1')
        self.assertEqual(2, len(one.stdout.splitlines()), one.stdout)
        missing = self.stats('7')
        self.assertEqual((1, 'IO class 7 is not configured.\n'),
                         (missing.returncode, missing.stderr))
