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

"""The metrics collector on casadm 26.03's own output, and the alert rules
and dashboard shipped in etc/monitoring against what it exports."""

import csv
import io
import json
import os
import re
import shutil
import subprocess

import fixtures
from prometheus_client import parser
import yaml

from os_brick_cas.metrics import exporter
from os_brick_cas.metrics import opts as metrics_opts
from tests.unit.os_brick_cas import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
MONITORING = os.path.join(ROOT, 'etc', 'monitoring')
VOLUME = '0f8c4a2e-1111-4222-8333-944455556666'
BY_ID = ('/dev/disk/by-id/rbd-cas-5e1dca5e0000400080000000c0ffee00-'
         'volumes--volume%%2D%s' % VOLUME.replace('-', '%2D'))


def stats_csv(name: str, **changes: str) -> str:
    """A casadm 26.03 stats sample with some columns changed."""
    header, values = csv.reader(io.StringIO(base.sample(name)))
    row = dict(zip(header, values))
    row.update(changes)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator='\n')
    writer.writerows([header, [row[title] for title in header]])
    return out.getvalue()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in parser.text_string_to_metric_families(text)
            for sample in family.samples}


def value(scrape: dict, name: str, **labels: str) -> float:
    [found] = [v for (n, have), v in scrape.items()
               if n == name and set(labels.items()) <= have]
    return found


class HostTestCase(base.TestCase):
    """One wb instance: a cached volume and a non-Cinder inactive core."""

    def setUp(self):
        super().setUp()
        self.conf.config(group=metrics_opts.GROUP, proc_root=self.tmp,
                         cache_seconds=0)
        self.fake = self.useFixture(base.FakeCasadm())
        self.fake.reply('--list-caches', (0, base.list_csv(
            'cache,1,/dev/nvme0n1p1,Running,wb,-',
            'core,1,%s,Active,-,/dev/cas1-1' % BY_ID,
            'core,2,/dev/sdc,Inactive,-,-'), ''))
        self.fake.reply('--stats', (0, stats_csv(
            'stats_P_cache_csv_HEAD.txt',
            **{'Cache write errors [Requests]': '3'}), ''))
        self.fake.reply('--stats .*--core-id 1', (0, stats_csv(
            'stats_P_core_csv_HEAD.txt', **{'Dirty for [s]': '120'}), ''))
        self.fake.reply('--stats .*--core-id 2', (0, stats_csv(
            'stats_P_core_csv_HEAD.txt', Status='Inactive'), ''))
        # core 1 drained: pinned to a no-allocation IO class
        self.fake.reply('--io-class --list', (
            0, 'IO class id,IO class name,Eviction priority,Allocation\n'
               '0,unclassified,255,1.00\n1,core_id:eq:1&done,0,0.00\n',
            ''))
        self.registry = exporter.build_registry()

    def scrape(self) -> dict:
        return samples(exporter.scrape(self.registry))


class CollectorTestCase(HostTestCase):

    def test_casadm_2603_columns(self):
        scrape = self.scrape()
        core = dict(cache_id='1', core_id='1', volume_id=VOLUME,
                    rbd_image='volumes/volume-' + VOLUME)
        # the sample: 10 read hits, 1 partial + 5 full read misses, 7 write
        # hits, 3 full write misses, 400 dirty of 1000 occupied blocks
        self.assertEqual(
            (10, 6, 7, 3, 400 * 4096, 1000 * 4096, 120, 1),
            tuple(value(scrape, 'os_brick_cas_core_' + name, **core)
                  for name in ('read_hits_total', 'read_misses_total',
                               'write_hits_total', 'write_misses_total',
                               'dirty_bytes', 'occupancy_bytes',
                               'dirty_for_seconds', 'active')))
        # drained state from the instance's IO-class table
        self.assertEqual((1, 0), (
            value(scrape, 'os_brick_cas_core_drained', core_id='1'),
            value(scrape, 'os_brick_cas_core_drained', core_id='2')))
        self.assertEqual((0, ''), (
            value(scrape, 'os_brick_cas_core_active', core_id='2'),
            dict(next(labels for name, labels in scrape
                      if name == 'os_brick_cas_core_active' and
                      ('core_id', '2') in labels))['volume_id']))
        self.assertEqual(3, value(
            scrape, 'os_brick_cas_cache_io_errors_total', cache_id='1',
            device='cache', direction='write'))
        self.assertEqual(1, value(scrape, 'os_brick_cas_cache_info',
                                  cache_id='1', mode='wb', status='Running'))

    def test_failed_calls_counted_across_scrapes(self):
        self.fake.reply('--stats .*--core-id 2',
                        (1, '', 'Error while getting statistics'))
        self.scrape()
        scrape = self.scrape()
        self.assertEqual((1, 2, 0, 6), (
            value(scrape, 'os_brick_cas_up'),
            value(scrape, 'os_brick_cas_casadm_errors_total',
                  operation='stats'),
            value(scrape, 'os_brick_cas_core_active', core_id='2'),
            value(scrape, 'os_brick_cas_casadm_call_seconds_count',
                  operation='stats')))

    def test_a_collection_is_reused_for_cache_seconds(self):
        self.conf.config(group=metrics_opts.GROUP, cache_seconds=3600)
        first = self.scrape()
        calls = len(self.fake.calls)
        self.assertEqual(first, self.scrape())
        self.assertEqual(calls, len(self.fake.calls))
        self.conf.config(group=metrics_opts.GROUP, cache_seconds=0)
        self.scrape()
        self.assertEqual(2 * calls, len(self.fake.calls))

    def test_the_exporters_own_short_casadm_bound(self):
        # [os_brick_cas] casadm_timeout (60 s) is for nova; a scrape's
        # calls use [os_brick_cas_exporter] casadm_timeout
        self.conf.config(group=metrics_opts.GROUP, casadm_timeout=3)
        bounds = []
        execute = self.fake._execute

        def spy(binary, *args, **kwargs):
            bounds.append(kwargs['timeout'])
            return execute(binary, *args, **kwargs)
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.privileged.casadm.processutils.execute',
            side_effect=spy))
        self.scrape()
        self.assertEqual({3}, set(bounds))
        # -L, -P of the instance, its IO classes, -P of each of 2 cores
        self.assertEqual(5, len(bounds))


class MonitoringFilesTestCase(HostTestCase):
    """etc/monitoring names only metrics the exporter really exports."""

    def exported_names(self) -> set[str]:
        return {name for name, _ in self.scrape()}

    @staticmethod
    def names_in(text: str) -> set[str]:
        return set(re.findall(r'\bos_brick_cas_[a-z_]+', text))

    def test_alert_rules(self):
        with open(os.path.join(MONITORING, 'os-brick-cas-alerts.yaml')) as f:
            rules = yaml.safe_load(f)['groups'][0]['rules']
        by_name = {rule['alert']: rule for rule in rules}
        self.assertLessEqual({'OsBrickCasDirtyDataStuck',
                              'OsBrickCasCoreInactive',
                              'OsBrickCasCacheDeviceErrors'}, set(by_name))
        used = set()
        for rule in rules:
            self.assertLessEqual({'summary', 'description'},
                                 set(rule['annotations']), rule['alert'])
            used |= self.names_in(rule['expr'])
        self.assertEqual(set(), used - self.exported_names())

    def test_alert_rules_fire_as_intended(self):
        # promtool (Debian "prometheus", tools/install-system-packages.sh)
        # evaluates the rules on the series in etc/monitoring/tests
        if not shutil.which('promtool'):
            self.skipTest('promtool not installed')
        for argv in (['check', 'rules', 'os-brick-cas-alerts.yaml'],
                     ['test', 'rules',
                      'tests/os-brick-cas-alerts-test.yaml']):
            result = subprocess.run(['promtool'] + argv, cwd=MONITORING,
                                    capture_output=True, text=True,
                                    timeout=120)
            self.assertEqual(0, result.returncode,
                             result.stdout + result.stderr)

    def test_dashboard(self):
        with open(os.path.join(MONITORING,
                               'os-brick-cas-dashboard.json')) as f:
            dashboard = json.load(f)
        exprs = [target['expr'] for panel in dashboard['panels']
                 for target in panel['targets']]
        ids = [panel['id'] for panel in dashboard['panels']]
        self.assertEqual(len(ids), len(set(ids)))
        used = set().union(*map(self.names_in, exprs))
        self.assertIn('os_brick_cas_core_dirty_bytes', used)
        self.assertEqual(set(), used - self.exported_names())

    def test_admin_page_documents_every_metric(self):
        with open(os.path.join(ROOT, 'doc', 'source', 'admin',
                               'monitoring.rst')) as page:
            documented = {re.sub(r'_(sum|count|bucket)$', '', name)
                          for name in self.names_in(page.read())}
        exported = {re.sub(r'_(sum|count|bucket)$', '', name)
                    for name in self.exported_names()}
        self.assertEqual(set(), exported - documented)
        # and names no metric that does not exist (the option group aside)
        self.assertEqual(set(), documented - exported - {metrics_opts.GROUP})
