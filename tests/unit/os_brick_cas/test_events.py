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

"""The event log of flushes and rbd calls, and the exporter reading it."""

import multiprocessing
import os
import threading
from unittest import mock

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from os_brick_cas import events
from os_brick_cas import exception
from os_brick_cas.metrics import eventlog
from os_brick_cas import opts


def _flushes(count: int) -> None:
    for _ in range(count):
        events.record('flush', 0.2, events.OK)


class EventsTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.conf.config(group=opts.GROUP, state_path=self.tmp)
        self.dir = os.path.join(self.tmp, 'events')
        self.collector = eventlog.EventCollector(cfg.CONF)

    def count(self, kind: str = 'flush', result: str = events.OK) -> int:
        self.collector.read_new()
        if kind == 'flush':
            histogram = self.collector.flush[result]
        else:
            histogram = self.collector.rbd[kind, result]
        return histogram.buckets()[-1][1]

    def test_timed_records_result_and_reraises(self):
        with events.timed('flush'):
            pass
        with testtools.ExpectedException(exception.FlushTimedOut):
            with events.timed('flush'):
                raise exception.FlushTimedOut(core=1, cache_id=2, timeout=5)
        with testtools.ExpectedException(RuntimeError):
            with events.timed('rbd_map'):
                raise RuntimeError('map failed')
        self.assertEqual(
            (1, 0, 1, 1),
            (self.count(), self.count(result=events.FAILED),
             self.count(result=events.TIMEOUT),
             self.count('map', events.FAILED)))

    def test_histogram_buckets_and_sum(self):
        for seconds in (0.05, 0.3, 7, 5000):
            events.record('flush', seconds, events.OK)
        self.collector.read_new()
        histogram = self.collector.flush[events.OK]
        buckets = dict(histogram.buckets())
        self.assertEqual((1, 2, 3, 3, 4), (
            buckets['0.1'], buckets['0.5'], buckets['15'], buckets['3600'],
            buckets['+Inf']))
        self.assertAlmostEqual(5007.35, histogram.total)

    def test_a_failed_write_never_fails_the_operation(self):
        # state_path is a file: the events directory cannot be created
        path = os.path.join(self.tmp, 'file')
        open(path, 'w').close()
        self.conf.config(group=opts.GROUP, state_path=path)
        with events.timed('flush'):
            result = 'done'
        self.assertEqual('done', result)
        with testtools.ExpectedException(exception.FlushFailed):
            with events.timed('flush'):
                raise exception.FlushFailed(core=1, cache_id=2, detail='x')

    def test_rotation_bounds_the_file_and_the_reader_keeps_up(self):
        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.events.MAX_BYTES', 1000))
        total = 0
        for _ in range(10):
            _flushes(7)         # < 1000 bytes between two scrapes
            total += 7
            self.assertEqual(total, self.count())
        names = sorted(os.listdir(self.dir))
        self.assertEqual(['%d.jsonl' % os.getpid(),
                          '%d.jsonl.1' % os.getpid()], names)
        for name in names:
            self.assertLessEqual(
                os.path.getsize(os.path.join(self.dir, name)), 1000)

    def test_old_files_are_pruned(self):
        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.events.MAX_FILES', 4))
        os.mkdir(self.dir)
        for pid in range(10):
            path = os.path.join(self.dir, '%d.jsonl' % (100000 + pid))
            with open(path, 'w') as old:
                old.write('{"kind": "flush", "result": "ok", '
                          '"seconds": 1}\n')
            os.utime(path, (pid, pid))
        events.record('flush', 1, events.OK)
        self.assertEqual(
            ['100007.jsonl', '100008.jsonl', '100009.jsonl',
             '%d.jsonl' % os.getpid()],
            sorted(os.listdir(self.dir)))

    def test_concurrent_appends_from_threads_and_processes(self):
        threads = [threading.Thread(target=_flushes, args=(300,))
                   for _ in range(8)]
        context = multiprocessing.get_context('fork')
        processes = [context.Process(target=_flushes, args=(300,))
                     for _ in range(4)]
        for worker in threads + processes:
            worker.start()
        for worker in threads + processes:
            worker.join()
        self.assertEqual([0] * 4, [p.exitcode for p in processes])
        self.assertEqual(12 * 300, self.count())
        self.assertEqual(0, self.collector.bad_lines)
        self.assertEqual(5, len(os.listdir(self.dir)))     # one per process

    def test_a_line_being_written_is_read_once_complete(self):
        os.mkdir(self.dir)
        path = os.path.join(self.dir, '1.jsonl')
        with open(path, 'w') as log:
            log.write('{"kind": "rbd_unmap", "result": "ok", ')
        self.assertEqual(0, self.count('unmap'))
        with open(path, 'a') as log:
            log.write('"seconds": 0.5}\nnot json\n')
        self.assertEqual(1, self.count('unmap'))
        self.assertEqual(1, self.collector.bad_lines)

    def test_unreadable_directory_is_logged_not_raised(self):
        with mock.patch('os.listdir', side_effect=PermissionError('no')):
            self.collector.read_new()
        self.assertEqual(0, self.count())
