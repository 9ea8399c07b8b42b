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

import contextlib
import csv
import datetime
import io
import ipaddress
import json
import os
import re
import shutil
import ssl
import subprocess
import urllib.request

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
import fixtures
from prometheus_client import parser
import yaml

from os_brick_cas.cmd import main as cli_main
from os_brick_cas.metrics import exporter
from os_brick_cas.metrics import opts as metrics_opts
from tests.unit.os_brick_cas import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
MONITORING = os.path.join(ROOT, 'etc', 'monitoring')
ADMIN_PAGE = os.path.join(ROOT, 'doc', 'source', 'admin', 'monitoring.rst')
#: the scrape job of the admin page, which the target alerts watch
JOB = 'os-brick-cas'
VOLUME = '0f8c4a2e-1111-4222-8333-944455556666'
BY_ID = ('/dev/disk/by-id/rbd-cas-5e1dca5e0000400080000000c0ffee00-'
         'volumes--volume%%2D%s' % VOLUME.replace('-', '%2D'))


def require_promtool(test: base.TestCase) -> None:
    """Skip without promtool, unless the prometheus suite requires it."""
    if shutil.which('promtool'):
        return
    if os.environ.get('OS_BRICK_CAS_REQUIRE_PROMTOOL'):
        test.fail('promtool is not installed: run '
                  'tools/install-system-packages.sh')
    test.skipTest('promtool not installed')


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
        # every family the exporter declares, with samples or not (e.g.
        # os_brick_cas_collect_error_info has samples only when up is 0)
        text = exporter.scrape(self.registry)
        if isinstance(text, bytes):
            text = text.decode()
        return {name for name, _ in self.scrape()} | set(
            re.findall(r'^# TYPE (\S+) ', text, re.MULTILINE))

    @staticmethod
    def role_variables() -> set[str]:
        """The Ansible role's variables share the metrics' prefix."""
        with open(os.path.join(ROOT, 'deploy', 'ansible', 'roles',
                               'os_brick_cas', 'defaults', 'main.yml')) as f:
            return set(yaml.safe_load(f))

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

    def rules(self) -> dict[str, dict]:
        with open(os.path.join(MONITORING, 'os-brick-cas-alerts.yaml')) as f:
            return {rule['alert']: rule
                    for rule in yaml.safe_load(f)['groups'][0]['rules']}

    def test_every_alert_links_its_runbook(self):
        with open(ADMIN_PAGE) as page:
            anchors = set(re.findall(r'^\.\. _([a-z0-9-]+):$', page.read(),
                                     re.MULTILINE))
        for name, rule in self.rules().items():
            url = rule['annotations'].get('runbook_url', '')
            page, _, anchor = url.partition('#')
            self.assertTrue(page.endswith('/admin/monitoring.html'), name)
            self.assertIn(anchor, anchors, name)

    def test_target_down_is_not_casadm_down(self):
        rules = self.rules()
        exprs = {rule['expr'] for rule in rules.values()}
        self.assertIn('up{job="%s"} == 0' % JOB, exprs)
        self.assertIn('absent(up{job="%s"})' % JOB, exprs)
        for name, rule in rules.items():
            about_target = 'up{job=' in rule['expr']
            # an alert named for the exporter/target is about the target
            self.assertEqual(about_target, 'Exporter' in name, name)
        [casadm] = [name for name, rule in rules.items()
                    if rule['expr'] == 'os_brick_cas_up == 0']
        self.assertIn('Casadm', casadm)
        # the job the alerts watch is the one the admin page configures
        with open(ADMIN_PAGE) as page:
            self.assertIn('- job_name: %s\n' % JOB, page.read())

    def test_alert_rules_fire_as_intended(self):
        # promtool (Debian "prometheus", tools/install-system-packages.sh)
        # evaluates the rules on the series in etc/monitoring/tests
        require_promtool(self)
        for argv in (['check', 'rules', 'os-brick-cas-alerts.yaml'],
                     ['test', 'rules',
                      'tests/os-brick-cas-alerts-test.yaml']):
            result = subprocess.run(['promtool'] + argv, cwd=MONITORING,
                                    capture_output=True, text=True,
                                    timeout=120)
            self.assertEqual(0, result.returncode,
                             result.stdout + result.stderr)

    @staticmethod
    def dashboard() -> dict:
        with open(os.path.join(MONITORING,
                               'os-brick-cas-dashboard.json')) as f:
            return json.load(f)

    def test_dashboard(self):
        dashboard = self.dashboard()
        exprs = [target['expr'] for panel in dashboard['panels']
                 for target in panel['targets']]
        ids = [panel['id'] for panel in dashboard['panels']]
        self.assertEqual(len(ids), len(set(ids)))
        used = set().union(*map(self.names_in, exprs))
        self.assertLessEqual({'os_brick_cas_core_dirty_bytes',
                              'os_brick_cas_core_dirty_for_seconds',
                              'os_brick_cas_core_drained'}, used)
        self.assertEqual(set(), used - self.exported_names())

    def test_dashboard_latency_histograms(self):
        exprs = [target['expr'] for panel in self.dashboard()['panels']
                 for target in panel['targets']]
        for histogram in ('flush_seconds', 'drain_seconds',
                          'rbd_call_seconds'):
            quantiles = [expr for expr in exprs
                         if expr.startswith('histogram_quantile(') and
                         'os_brick_cas_%s_bucket' % histogram in expr]
            self.assertTrue(quantiles, histogram)
            for expr in quantiles:
                self.assertRegex(expr, r'sum by \(le\b')

    def test_dashboard_per_volume_panels_stay_readable(self):
        # at hundreds of volumes per host a graph of every volume is
        # unreadable: per-volume series only through topk/bottomk, or
        # aggregated above the volume
        for panel in self.dashboard()['panels']:
            if panel['type'] != 'timeseries':
                continue
            for target in panel['targets']:
                expr = target['expr']
                if 'os_brick_cas_core_' not in expr:
                    continue
                top = re.match(r'(topk|bottomk)\(\$topk, ', expr)
                by = re.match(r'(sum|count|max|min|avg) by \(([^)]*)\)',
                              expr)
                self.assertTrue(
                    top or (by and not {'volume_id', 'core_id'} & set(
                        re.split(r',\s*', by.group(2)))),
                    '%s: %s' % (panel['title'], expr))

    def test_dashboard_queries_are_valid_promql(self):
        require_promtool(self)
        values = {'$topk': '10', '$instance': '.*',
                  '$__rate_interval': '5m'}
        rules = []
        for panel in self.dashboard()['panels']:
            for target in panel['targets']:
                expr = target['expr']
                for variable, value in values.items():
                    expr = expr.replace(variable, value)
                self.assertNotIn('$', expr)
                rules.append({'record': 'panel_%d_%s' % (
                    panel['id'], target['refId'].lower()), 'expr': expr})
        path = os.path.join(self.tmp, 'dashboard-rules.yaml')
        with open(path, 'w') as f:
            yaml.safe_dump({'groups': [{'name': 'dashboard',
                                        'rules': rules}]}, f)
        result = subprocess.run(['promtool', 'check', 'rules', path],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)

    def test_docs_scrape_the_address_the_exporter_listens_on(self):
        default = metrics_opts.exporter_opts[0]
        self.assertEqual('listen_address', default.name)
        self.assertTrue(ipaddress.ip_address(default.default).is_loopback)
        with open(ADMIN_PAGE) as page:
            text = page.read()
        [listen] = re.findall(r'^\s+listen_address = (\S+)', text,
                              re.MULTILINE)
        [port] = re.findall(r'^\s+listen_port = (\d+)', text, re.MULTILINE)
        self.assertEqual(metrics_opts.exporter_opts[1].default, int(port))
        # the page states the real default...
        self.assertIn('``%s:%s``' % (default.default, port), text)
        # ...and scrapes the address its example sets, not another one
        [targets] = re.findall(r"- targets: \[(.*)\]", text)
        hosts = {target.strip(" '").rsplit(':', 1)[0]
                 for target in targets.split(',')}
        self.assertIn(listen, hosts)
        self.assertFalse(ipaddress.ip_address(listen).is_loopback)

    def test_admin_page_documents_every_metric(self):
        with open(os.path.join(ROOT, 'doc', 'source', 'admin',
                               'monitoring.rst')) as page:
            documented = {re.sub(r'_(sum|count|bucket)$', '', name)
                          for name in self.names_in(page.read())}
        exported = {re.sub(r'_(sum|count|bucket)$', '', name)
                    for name in self.exported_names()}
        self.assertEqual(set(), exported - documented)
        # and names no metric that does not exist (the option group aside)
        self.assertEqual(set(), documented - exported - {metrics_opts.GROUP} -
                         self.role_variables())


def self_signed(directory: str) -> tuple[str, str]:
    """A certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME,
                                         'os-brick-cas test')])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                           critical=True)
            .sign(key, hashes.SHA256()))
    cert_path = os.path.join(directory, 'cert.pem')
    key_path = os.path.join(directory, 'key.pem')
    with open(cert_path, 'wb') as out:
        out.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, 'wb') as out:
        out.write(key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
    return cert_path, key_path


class HttpsTestCase(HostTestCase):
    """Optional TLS and client certificates of the HTTP endpoint."""

    def setUp(self):
        super().setUp()
        self.cert, self.key = self_signed(self.tmp)
        self.conf.config(group=metrics_opts.GROUP, listen_port=0,
                         tls_cert_file=self.cert, tls_key_file=self.key)

    def serve(self) -> str:
        server, thread = exporter.start_http()
        self.addCleanup(thread.join, 5)
        self.addCleanup(server.shutdown)
        return '127.0.0.1:%d/metrics' % server.server_port

    def get(self, url: str, context=None) -> str:
        with urllib.request.urlopen(url, timeout=10,
                                    context=context) as response:
            return response.read().decode()

    def client(self, with_cert: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.cert)
        if with_cert:
            context.load_cert_chain(self.cert, self.key)
        return context

    def test_https_only_when_configured(self):
        where = self.serve()
        text = self.get('https://' + where, self.client(False))
        self.assertIn('os_brick_cas_up 1.0', text)
        self.assertRaises(OSError, self.get, 'http://' + where)

    def test_client_certificate_required_with_a_client_ca(self):
        self.conf.config(group=metrics_opts.GROUP,
                         tls_client_ca_file=self.cert)
        where = self.serve()
        self.assertRaises(OSError, self.get, 'https://' + where,
                          self.client(False))
        self.assertIn('os_brick_cas_up 1.0', self.get(
            'https://' + where, self.client(True)))

    def test_half_a_tls_configuration_is_refused(self):
        self.conf.config(group=metrics_opts.GROUP, tls_key_file=None)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli_main.main(['exporter'])
        self.assertEqual(2, code)
        self.assertIn('set both [os_brick_cas_exporter] tls_cert_file and '
                      'tls_key_file, or neither', err.getvalue())
