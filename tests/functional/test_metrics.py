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

"""The Prometheus exporter scraping the simulated host.

The collector, casadm layer and privsep entry points are real; the
stand-in casadm answers below. Values are read back from the scrape text
with prometheus_client's own parser, as Prometheus would see them.
"""

import concurrent.futures
import getpass
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from unittest import mock
import urllib.request
import uuid

import fixtures
from oslo_privsep import daemon as privsep_daemon
from prometheus_client import parser

from os_brick_cas import casadm
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas import lifecycle
from os_brick_cas.metrics import exporter
from os_brick_cas.metrics import opts as metrics_opts
from os_brick_cas.opencas import casadm_output
from os_brick_cas.privileged import casadm as priv_casadm
from os_brick_cas import rbd_names
from tests.functional import test_cli

VOL_WT = test_cli.VOL_WT
VOL_WB = test_cli.VOL_WB
BLOCK = 4096


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """``{(sample name, labels): value}`` of a scrape."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in parser.text_string_to_metric_families(text)
            for sample in family.samples}


def value(scrape: dict, name: str, **labels: str) -> float:
    """The one sample *name* whose labels include *labels*."""
    found = [v for (n, have), v in scrape.items()
             if n == name and set(labels.items()) <= have]
    if len(found) != 1:
        raise AssertionError('%d samples %s%s in %s' % (
            len(found), name, labels, sorted(scrape)))
    return found[0]


#: a time-bounded scrape answers well before this (Prometheus' default
#: scrape_timeout is 10 s); the hangs below last far longer
PROMPT = 8
HANG = 120


def http_scrape(server: object, timeout: float = PROMPT) -> str:
    """One scrape over HTTP, as Prometheus does it, within *timeout*."""
    url = 'http://127.0.0.1:%d/metrics' % server.server_port
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def _unblock(fifo: str) -> None:
    """Let a reader blocked opening *fifo* go on (it reads EOF)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


class ExporterTestCase(test_cli.CliTestCase):

    def setUp(self) -> None:
        super().setUp()
        self.conf.config(group=metrics_opts.GROUP, listen_port=0,
                         cache_seconds=0)

    def serve(self) -> object:
        server, thread = exporter.start_http()
        self.addCleanup(thread.join, 5)
        self.addCleanup(server.shutdown)
        return server

    def scrape(self) -> dict[tuple[str, frozenset], float]:
        return samples(exporter.scrape(exporter.build_registry()))

    def core_of(self, cache_id: int):
        [core] = [c for c in self.cores() if c.cache_id == cache_id]
        return core

    def test_counts_hits_dirty_and_state_per_volume(self):
        self.attach(VOL_WT, 'wt')
        self.attach(VOL_WB, 'wb')
        wt, wb = self.core_of(1), self.core_of(2)
        self.host.set_dirty(2, wb.core_id, 40)
        self.host.record_reads(1, wt.core_id, total=200, hits=150)

        scrape = self.scrape()
        self.assertEqual(1, value(scrape, 'os_brick_cas_up'))
        on_wt = dict(cache_id='1', core_id=str(wt.core_id),
                     volume_id=VOL_WT, instance_uuid='',
                     rbd_image='volumes/volume-' + VOL_WT)
        self.assertEqual(
            (150, 50, 1, 0),
            (value(scrape, 'os_brick_cas_core_read_hits_total', **on_wt),
             value(scrape, 'os_brick_cas_core_read_misses_total', **on_wt),
             value(scrape, 'os_brick_cas_core_active', **on_wt),
             value(scrape, 'os_brick_cas_core_dirty_bytes', **on_wt)))
        # read misses are promoted: they occupy the cache
        self.assertEqual(50 * BLOCK, value(
            scrape, 'os_brick_cas_core_occupancy_bytes', **on_wt))
        self.assertEqual((40 * BLOCK, 40, 0), (
            value(scrape, 'os_brick_cas_core_dirty_bytes', volume_id=VOL_WB),
            value(scrape, 'os_brick_cas_core_write_hits_total',
                  volume_id=VOL_WB),
            value(scrape, 'os_brick_cas_core_write_misses_total',
                  volume_id=VOL_WB)))
        self.assertEqual((40 * BLOCK, 150, 1, 1), (
            value(scrape, 'os_brick_cas_cache_dirty_bytes', cache_id='2'),
            value(scrape, 'os_brick_cas_cache_read_hits_total',
                  cache_id='1'),
            value(scrape, 'os_brick_cas_cache_running', cache_id='2'),
            value(scrape, 'os_brick_cas_cache_info', cache_id='2',
                  mode='wb', status='Running')))
        self.assertEqual(0, value(
            scrape, 'os_brick_cas_cache_io_errors_total', cache_id='2',
            device='cache', direction='write'))
        self.assertEqual(0, value(scrape, 'os_brick_cas_casadm_errors_total',
                                  operation='stats'))

    def test_inactive_core_keeps_its_dirty_data_visible(self):
        self.attach(VOL_WB, 'wb')
        self.host.set_dirty(2, self.core_of(2).core_id, 9)
        self.host.reboot()              # RBD device gone: core inactive

        scrape = self.scrape()
        self.assertEqual((0, 9 * BLOCK, 0), (
            value(scrape, 'os_brick_cas_core_active', volume_id=VOL_WB),
            value(scrape, 'os_brick_cas_core_dirty_bytes', volume_id=VOL_WB),
            value(scrape, 'os_brick_cas_cache_running', cache_id='2')))

    def test_drift_is_a_metric_from_the_scrape_listing(self):
        """A held drain the host lost, a table loaded by hand (issue 21)."""
        self.attach(VOL_WB, 'wb')
        core = self.core_of(2)
        tool = casadm.Casadm()
        subject = lifecycle.Volume(rbd_names.parse_link_name(
            os.path.basename(core.device)), VOL_WB)
        lifecycle.Lifecycle(tool).drain(
            subject, lifecycle.Cinder('compute-a', in_use=False),
            lifecycle.deadline(30), holder=lifecycle.LIVE_MIGRATION,
            instance='server-1')
        scrape = self.scrape()
        self.assertFalse([name for name, _ in scrape
                          if name == 'os_brick_cas_drift'])
        # by hand: the core's class now caches (allocation 0.5)
        tool.load_io_classes(2, [drain.UNCLASSIFIED, casadm_output.IoClass(
            5, drain.drain_rule(core.core_id), 3, 0.5)])
        listings = []
        real_list = casadm.Casadm.list_caches

        def counted(casadm_self):
            listings.append(1)
            return real_list(casadm_self)

        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.casadm.Casadm.list_caches', counted))
        scrape = self.scrape()
        self.assertEqual((1, 1), (
            value(scrape, 'os_brick_cas_drift', subject=VOL_WB,
                  kind='held'),
            value(scrape, 'os_brick_cas_drift',
                  subject='cache instance 2', kind='table')))
        # from the scrape's own listing: casadm -L once in this scrape
        self.assertEqual(1, len(listings))

    def test_a_bad_journal_record_is_a_drift_kind_not_a_failed_scrape(self):
        """Issue 32: a FIFO or foreign record in the journal (quarantine)."""
        self.attach(VOL_WB, 'wb')
        os.makedirs(lifecycle.journal_dir(), exist_ok=True)
        fifo = os.path.join(lifecycle.journal_dir(), 'rbd-volumes--x.json')
        os.mkfifo(fifo)
        self.addCleanup(_unblock, fifo)
        results = []
        scraper = threading.Thread(
            target=lambda: results.append(self.scrape()), daemon=True)
        scraper.start()
        scraper.join(PROMPT * 3)
        self.assertTrue(results, 'the scrape hung on a FIFO in the journal')
        [(name, labels)] = [(n, dict(lb)) for n, lb in results[0]
                            if n == 'os_brick_cas_drift']
        self.assertEqual('quarantine', labels['kind'])
        self.assertIn('rbd-volumes--x.json', labels['subject'])
        self.assertEqual(1, value(results[0], 'os_brick_cas_up'))

    def test_casadm_failure_is_a_metric_not_a_failed_scrape(self):
        self.host.set_module_loaded(False)
        scrape = self.scrape()
        self.assertEqual((0, 1), (
            value(scrape, 'os_brick_cas_up'),
            value(scrape, 'os_brick_cas_casadm_errors_total',
                  operation='list')))
        self.assertFalse([name for name, _ in scrape
                          if name.startswith('os_brick_cas_core_')])

    def test_casadm_failure_names_its_reason(self):
        self.host.set_module_loaded(False)
        scrape = self.scrape()
        [(labels, found)] = [(dict(have), v) for (n, have), v in
                             scrape.items()
                             if n == 'os_brick_cas_collect_error_info']
        self.assertEqual((1, 'list'), (found, labels['operation']))
        self.assertTrue(labels['reason'], labels)
        self.host.set_module_loaded(True)
        scrape = self.scrape()
        self.assertEqual(1, value(scrape, 'os_brick_cas_up'))
        self.assertFalse([n for n, _ in scrape
                          if n == 'os_brick_cas_collect_error_info'])

    def test_privileged_helper_that_cannot_start_is_up_0_not_http_500(self):
        # main: privsep's error escaped the collector: HTTP 500, no metric
        self.attach(VOL_WB, 'wb')
        logger = self.useFixture(fixtures.FakeLogger(
            name='os_brick_cas.metrics'))
        broken = privsep_daemon.FailedToDropPrivileges(
            'privsep helper command exited non-zero (1)')
        with mock.patch.object(priv_casadm, 'list_caches',
                               side_effect=broken):
            scrape = samples(http_scrape(self.serve()))
        self.assertEqual((0, 1), (
            value(scrape, 'os_brick_cas_up'),
            value(scrape, 'os_brick_cas_collect_errors_total')))
        self.assertEqual(1, value(
            scrape, 'os_brick_cas_collect_error_info', operation='list',
            reason='FailedToDropPrivileges: privsep helper command exited '
                   'non-zero (1)'))
        self.assertIn('privsep helper command exited non-zero', logger.output)

    def test_unexpected_error_in_the_collection_is_up_0(self):
        self.attach(VOL_WB, 'wb')
        with mock.patch('os_brick_cas.report.rbd_image_of',
                        side_effect=RuntimeError('parse bug')):
            scrape = samples(http_scrape(self.serve()))
        self.assertEqual(0, value(scrape, 'os_brick_cas_up'))
        self.assertEqual(1, value(
            scrape, 'os_brick_cas_collect_error_info',
            reason='RuntimeError: parse bug'))

    def test_hung_casadm_listing_gives_a_prompt_scrape_with_up_0(self):
        self.attach(VOL_WB, 'wb')
        self.conf.config(group=metrics_opts.GROUP, casadm_timeout=2)
        self.host.inject_fault('list-caches', hang=HANG)
        server = self.serve()
        started = time.monotonic()
        scrape = samples(http_scrape(server))
        self.assertLess(time.monotonic() - started, PROMPT)
        self.assertEqual((0, 1), (
            value(scrape, 'os_brick_cas_up'),
            value(scrape, 'os_brick_cas_collect_errors_total')))
        # casadm answers again: up again, the failure stays counted
        scrape = samples(http_scrape(server))
        self.assertEqual((1, 1), (
            value(scrape, 'os_brick_cas_up'),
            value(scrape, 'os_brick_cas_collect_errors_total')))

    def test_hung_statistics_end_the_collection_after_one_time_out(self):
        self.attach(VOL_WT, 'wt')
        self.attach(VOL_WB, 'wb')
        self.conf.config(group=metrics_opts.GROUP, casadm_timeout=2)
        # every statistics call would hang: 2 instances + 2 cores
        self.host.inject_fault('stats', hang=HANG, count=10)
        # the hangs the collection never reached would hold the detaches
        # of the clean-up for a casadm time-out each (~60 s of this test)
        self.addCleanup(self.host.clear_faults)
        server = self.serve()
        started = time.monotonic()
        scrape = samples(http_scrape(server))
        self.assertLess(time.monotonic() - started, PROMPT)
        self.assertEqual((0, 1, 4), (
            value(scrape, 'os_brick_cas_up'),
            value(scrape, 'os_brick_cas_collect_errors_total'),
            value(scrape, 'os_brick_cas_casadm_errors_total',
                  operation='stats')))
        self.assertEqual(1, value(scrape, 'os_brick_cas_core_active',
                                  volume_id=VOL_WB))

    def count_concurrent_casadm(self) -> dict[str, int]:
        """Spy on casadm runs (the process boundary): how many at once."""
        seen = {'now': 0, 'max': 0, 'list': 0}
        lock = threading.Lock()
        execute = priv_casadm.processutils.execute

        def spy(binary, *args, **kwargs):
            with lock:
                seen['now'] += 1
                seen['max'] = max(seen['max'], seen['now'])
                seen['list'] += '--list-caches' in args
            try:
                time.sleep(0.05)    # let parallel scrapes overlap
                return execute(binary, *args, **kwargs)
            finally:
                with lock:
                    seen['now'] -= 1
        self.useFixture(fixtures.MockPatchObject(
            priv_casadm.processutils, 'execute', side_effect=spy))
        return seen

    def parallel_scrapes(self, server: object, count: int = 30) -> list:
        # the scrapes queue behind one collection at a time (what these
        # tests check): the last waits for all the others, ~1-2 s each on
        # an idle machine, 4 s each at a load of 4 (seen: a 30 s time-out)
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            return list(pool.map(
                lambda _: samples(http_scrape(server, 15 * count)),
                range(count)))

    def test_parallel_scrapes_share_one_collection(self):
        self.attach(VOL_WB, 'wb')
        self.host.set_dirty(2, self.core_of(2).core_id, 5)
        self.conf.config(group=metrics_opts.GROUP, cache_seconds=30)
        seen = self.count_concurrent_casadm()
        scrapes = self.parallel_scrapes(self.serve())
        self.assertEqual((1, 1), (seen['list'], seen['max']))
        self.assertEqual({5 * BLOCK}, {
            value(scrape, 'os_brick_cas_core_dirty_bytes', volume_id=VOL_WB)
            for scrape in scrapes})

    def test_parallel_scrapes_never_run_casadm_in_parallel(self):
        self.attach(VOL_WB, 'wb')
        seen = self.count_concurrent_casadm()     # cache_seconds = 0
        self.parallel_scrapes(self.serve(), count=10)
        self.assertEqual(1, seen['max'])
        self.assertGreater(seen['list'], 1)

    def test_scrape_passes_promtool_check_metrics(self):
        if not shutil.which('promtool'):
            if os.environ.get('OS_BRICK_CAS_REQUIRE_PROMTOOL'):
                self.fail('promtool is not installed '
                          '(tools/install-system-packages.sh)')
            self.skipTest('promtool not installed')
        self.attach(VOL_WT, 'wt')
        self.attach(VOL_WB, 'wb')
        self.host.set_dirty(2, self.core_of(2).core_id, 5)
        self.assertEqual(0, self.cli('flush', '--all')[0])
        text = http_scrape(self.serve())
        result = subprocess.run(['promtool', 'check', 'metrics'], input=text,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode,
                         result.stdout + result.stderr)
        self.assertIn('os_brick_cas_flush_seconds_bucket', text)

    def test_instance_uuid_of_the_qemu_holding_the_device(self):
        self.conf.config(group=metrics_opts.GROUP,
                         qemu_user=getpass.getuser())
        info = self.attach(VOL_WT, 'wt')
        instance = str(uuid.uuid4())
        # stands in for QEMU: "-uuid <uuid>" on its command line, the
        # cached device open
        qemu = subprocess.Popen(
            [sys.executable, '-c',
             'import sys, time\nf = open(sys.argv[1], "rb")\n'
             'print("open", flush=True)\ntime.sleep(60)',
             info['path'], '-uuid', instance],
            stdout=subprocess.PIPE, text=True)
        self.addCleanup(qemu.wait)
        self.addCleanup(qemu.kill)
        self.assertEqual('open\n', qemu.stdout.readline())

        scrape = self.scrape()
        self.assertEqual(1, value(scrape, 'os_brick_cas_core_active',
                                  volume_id=VOL_WT, instance_uuid=instance))
        self.conf.config(group=metrics_opts.GROUP, instance_uuids=False)
        self.assertEqual(1, value(self.scrape(), 'os_brick_cas_core_active',
                                  volume_id=VOL_WT, instance_uuid=''))

    def test_textfile_written_atomically_for_node_exporter(self):
        self.attach(VOL_WB, 'wb')
        self.host.set_dirty(2, self.core_of(2).core_id, 7)
        directory = os.path.join(self.tmp, 'textfile')
        os.mkdir(directory)
        path = os.path.join(directory, 'os_brick_cas.prom')

        code, _, err = self.cli('exporter', '--textfile', path)
        self.assertEqual(0, code, err)
        self.assertEqual(['os_brick_cas.prom'], os.listdir(directory))
        with open(path) as prom:
            scrape = samples(prom.read())
        self.assertEqual(7 * BLOCK, value(
            scrape, 'os_brick_cas_core_dirty_bytes', volume_id=VOL_WB))

    def test_textfile_in_a_missing_directory_says_what_to_do(self):
        code, _, err = self.cli('exporter', '--textfile',
                                os.path.join(self.tmp, 'nowhere', 'x.prom'))
        self.assertEqual(1, code)
        self.assertIn('check that its directory exists', err)

    def test_http_endpoint_on_the_configured_address(self):
        self.attach(VOL_WT, 'wt')
        self.host.record_reads(1, self.core_of(1).core_id, total=10, hits=4)
        server, thread = exporter.start_http()
        self.addCleanup(thread.join, 5)
        self.addCleanup(server.shutdown)
        self.assertEqual('127.0.0.1', server.server_address[0])
        url = 'http://127.0.0.1:%d/metrics' % server.server_port
        start = time.monotonic()
        with urllib.request.urlopen(url, timeout=30) as response:
            scrape = samples(response.read().decode())
        self.assertLess(time.monotonic() - start, 30)
        self.assertEqual(6, value(
            scrape, 'os_brick_cas_core_read_misses_total', volume_id=VOL_WT))

    def test_the_command_serves_http_until_stopped(self):
        self.attach(VOL_WB, 'wb')
        self.host.set_dirty(2, self.core_of(2).core_id, 3)
        with socket.socket() as probe:
            probe.bind(('127.0.0.1', 0))
            port = probe.getsockname()[1]
        conf = os.path.join(self.tmp, 'exporter.conf')
        with open(conf, 'w') as conf_file:
            conf_file.write('[%s]\nlisten_port = %d\n' % (
                metrics_opts.GROUP, port))
        command = subprocess.Popen(
            [sys.executable, '-m', 'os_brick_cas.cmd.main', 'exporter',
             '--config-file', conf], stderr=subprocess.PIPE, text=True)
        self.addCleanup(command.wait)
        self.addCleanup(command.terminate)
        url = 'http://127.0.0.1:%d/metrics' % port
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    scrape = samples(response.read().decode())
                break
            except OSError:
                if command.poll() is not None or time.monotonic() > deadline:
                    self.fail('exporter did not serve %s: %s' % (
                        url, command.stderr.read() if command.poll() is not
                        None else 'timeout'))
                time.sleep(0.2)
        self.assertEqual(3 * BLOCK, value(
            scrape, 'os_brick_cas_core_dirty_bytes', volume_id=VOL_WB))
        # a service says where it listens (main: nothing without -v)
        command.terminate()
        _, err = command.communicate(timeout=30)
        self.assertIn('os-brick-cas metrics on %s' % url, err)

    def test_busy_port_says_which_option_to_change(self):
        with socket.socket() as busy:
            busy.bind(('127.0.0.1', 0))
            busy.listen()
            self.conf.config(group=metrics_opts.GROUP,
                             listen_port=busy.getsockname()[1])
            code, _, err = self.cli('exporter')
        self.assertEqual(1, code)
        self.assertIn('set [os_brick_cas_exporter] listen_address/'
                      'listen_port', err)


class NovaComputeEventsTestCase(test_cli.CliTestCase):
    """Flushes and rbd calls of the connector, seen by the exporter.

    The connector records them in state_path/events as nova-compute
    would; a fresh exporter registry reads them back.
    """

    scrape = ExporterTestCase.scrape
    core_of = ExporterTestCase.core_of

    def wb_props(self, epoch: str = '') -> dict:
        image = self.image('volume-' + VOL_WB)
        extra = {'cas_epoch': epoch} if epoch else {}
        return self.props(image, 'wb', volume_id=VOL_WB, **extra)

    def test_detach_flush_and_rbd_calls_are_observed(self):
        props = self.wb_props()
        self.connector.connect_volume(props)
        self.host.set_dirty(2, self.core_of(2).core_id, 20)
        self.connector.disconnect_volume(props, None)

        scrape = self.scrape()
        self.assertEqual((1, 0, 0), tuple(
            value(scrape, 'os_brick_cas_flush_seconds_count', result=result)
            for result in ('ok', 'failed', 'timeout')))
        self.assertEqual(1, value(scrape, 'os_brick_cas_flush_seconds_bucket',
                                  result='ok', le='+Inf'))
        self.assertEqual((1, 1, 0), (
            value(scrape, 'os_brick_cas_rbd_call_seconds_count',
                  operation='map', result='ok'),
            value(scrape, 'os_brick_cas_rbd_call_seconds_count',
                  operation='unmap', result='ok'),
            value(scrape, 'os_brick_cas_rbd_call_seconds_count',
                  operation='map', result='failed')))
        self.assertGreater(value(scrape, 'os_brick_cas_rbd_call_seconds_sum',
                                 operation='map', result='ok'), 0)

    def test_failed_flush_is_counted_as_failed(self):
        props = self.wb_props()
        self.connector.connect_volume(props)
        self.addCleanup(self._detach_quietly, props)
        core = self.core_of(2)
        self.host.set_dirty(2, core.core_id, 20)
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core device\n')
        self.assertRaises(exception.FlushFailed,
                          self.connector.disconnect_volume,
                          props, None)
        self.assertEqual(20, self.dirty(core))

        scrape = self.scrape()
        self.assertEqual((0, 1), (
            value(scrape, 'os_brick_cas_flush_seconds_count', result='ok'),
            value(scrape, 'os_brick_cas_flush_seconds_count',
                  result='failed')))

    def test_exporter_reads_only_new_events_each_scrape(self):
        props = self.wb_props()
        registry = exporter.build_registry()
        self.connector.connect_volume(props)
        self.connector.disconnect_volume(props, None)
        first = samples(exporter.scrape(registry))
        self.connector.connect_volume(props)
        self.connector.disconnect_volume(props, None)
        second = samples(exporter.scrape(registry))
        self.assertEqual((1, 2), tuple(
            value(scrape, 'os_brick_cas_flush_seconds_count', result='ok')
            for scrape in (first, second)))

    def test_operator_flush_is_counted(self):
        self.connector.connect_volume(self.wb_props())
        self.addCleanup(self._detach_quietly, self.wb_props())
        self.host.set_dirty(2, self.core_of(2).core_id, 20)
        code, _, err = self.cli('flush', '--volume', VOL_WB)
        self.assertEqual(0, code, err)
        self.host.set_dirty(2, self.core_of(2).core_id, 20)
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core device\n')
        self.assertEqual(1, self.cli('flush', '--all')[0])
        scrape = self.scrape()
        self.assertEqual((1, 1), (
            value(scrape, 'os_brick_cas_flush_seconds_count', result='ok'),
            value(scrape, 'os_brick_cas_flush_seconds_count',
                  result='failed')))

    def test_core_attachment_from_the_ownership_record(self):
        epoch = str(uuid.uuid4())
        self.connector.connect_volume(self.wb_props(epoch))
        self.addCleanup(self._detach_quietly, self.wb_props(epoch))
        self.assertEqual(1, value(
            self.scrape(), 'os_brick_cas_core_attachment_info',
            volume_id=VOL_WB, attachment=epoch))
