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

"""The event files under attack: what nova's user can plant in
state_path/events never hangs a scrape, fails it, or makes the root
writer follow a link. Real files, FIFOs and symlinks in a temp dir."""

import json
import logging
import os
import threading

import ddt
import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import prometheus_client
from prometheus_client import parser
import testtools

from os_brick_cas import events
from os_brick_cas.metrics import eventlog
from os_brick_cas.metrics import exporter
from os_brick_cas import opts

#: a bounded call returns well before this
PROMPT = 5


def line(**fields) -> str:
    event = {'kind': 'flush', 'result': 'ok', 'seconds': 1.5, 'time': 1}
    event.update(fields)
    return json.dumps(event) + '\n'


class _Bad(str):
    """A malformed event line, named for ddt."""

    __name__ = ''


def bad(name: str, text: str) -> _Bad:
    value = _Bad(text)
    value.__name__ = name
    return value


def finishes(func, *args) -> bool:
    """Whether func(*args) returns within PROMPT (it may hang forever)."""
    worker = threading.Thread(target=func, args=args, daemon=True)
    worker.start()
    worker.join(PROMPT)
    return not worker.is_alive()


class EventsDirTestCase(testtools.TestCase):
    """A state_path/events directory and an exporter registry reading it."""

    def setUp(self) -> None:
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        conf = self.useFixture(config_fixture.Config(cfg.CONF))
        conf.config(group=opts.GROUP, state_path=self.tmp)
        self.dir = os.path.join(self.tmp, 'events')
        os.mkdir(self.dir)
        self.registry = prometheus_client.CollectorRegistry(
            auto_describe=False)
        self.registry.register(eventlog.EventCollector(cfg.CONF))

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, name)
        with open(path, 'a') as log:
            log.write(text)
        return path

    def scrape(self) -> dict[str, float]:
        """``{sample: value}`` of the flush and invalid-line counters."""
        text = exporter.scrape(self.registry)
        return {'%s%s' % (sample.name, sample.labels): sample.value
                for family in parser.text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name in ('os_brick_cas_flush_seconds_count',
                                   'os_brick_cas_event_lines_invalid_total')}

    def counts(self) -> tuple[float, float]:
        """(ok flushes, invalid lines) after one scrape."""
        scrape = self.scrape()
        return (scrape["os_brick_cas_flush_seconds_count{'result': 'ok'}"],
                scrape['os_brick_cas_event_lines_invalid_total{}'])


@ddt.ddt
class EventFilesTestCase(EventsDirTestCase):
    """The reader: what it skips, counts and never does."""

    def test_a_fifo_named_jsonl_is_skipped_without_hanging(self):
        fifo = os.path.join(self.dir, '66.jsonl')
        os.mkfifo(fifo)
        # a hung reader would be stuck in open(); free it at the end
        self.addCleanup(lambda: os.close(os.open(
            fifo, os.O_WRONLY | os.O_NONBLOCK)) if reader_hung else None)
        self.write('1.jsonl', line())
        result = []
        reader_hung = not finishes(lambda: result.append(self.counts()))
        self.assertFalse(reader_hung, 'a scrape hangs on a FIFO')
        self.assertEqual([(1, 0)], result)

    def test_a_symlink_named_jsonl_is_not_followed(self):
        outside = os.path.join(self.tmp, 'elsewhere.log')
        with open(outside, 'w') as other:
            other.write(line() * 3)
        os.symlink(outside, os.path.join(self.dir, '77.jsonl'))
        self.assertEqual((0, 0), self.counts())

    def test_an_events_directory_that_is_a_symlink_is_not_read(self):
        os.rename(self.dir, self.dir + '.real')
        os.symlink(self.dir + '.real', self.dir)
        self.write('1.jsonl', line())
        self.assertEqual((0, 0), self.counts())

    @ddt.data(
        bad('kind_int', line(kind=1)), bad('kind_list', line(kind=['flush'])),
        bad('kind_null', line(kind=None)),
        bad('kind_unknown', line(kind='rm -rf')),
        bad('result_list', line(result=['ok'])),
        bad('result_dict', line(result={'ok': 1})),
        bad('result_unknown', line(result='fine')),
        bad('seconds_str', line(seconds='5')),
        bad('seconds_bool', line(seconds=True)),
        bad('seconds_negative', line(seconds=-1)),
        bad('seconds_list', line(seconds=[1])),
        bad('seconds_nan',
            '{"kind": "flush", "result": "ok", "seconds": NaN}\n'),
        bad('seconds_inf',
            '{"kind": "flush", "result": "ok", "seconds": 1e999}\n'),
        bad('not_an_object', '[1, 2]\n'), bad('a_string', '"flush"\n'),
        bad('not_json', 'not json\n'),
        bad('nested_deeper_than_recursion', '[' * 3000 + '\n'))
    def test_an_invalid_line_is_counted_and_skipped(self, bad):
        self.write('1.jsonl', line(seconds=2) + bad + line(seconds=3))
        self.assertEqual((2, 1), self.counts())
        # the next scrape reads on from there
        self.write('1.jsonl', line())
        self.assertEqual((3, 1), self.counts())

    def test_bytes_that_are_not_utf8_are_an_invalid_line(self):
        with open(os.path.join(self.dir, '1.jsonl'), 'wb') as log:
            log.write(b'{"kind": "\xff\xfe"}\n' + line().encode())
        self.assertEqual((1, 1), self.counts())

    def test_an_oversize_line_is_counted_once_and_skipped(self):
        self.write('1.jsonl', line(padding='x' * (2 * events.MAX_LINE)) +
                   line())
        self.assertEqual((1, 1), self.counts())
        # one still being written, past the bound, across scrapes
        self.write('1.jsonl', '{"kind": "flush", "pad": "' +
                   'y' * (2 * events.MAX_LINE))
        self.assertEqual((1, 2), self.counts())
        self.write('1.jsonl', 'y' * (2 * events.MAX_LINE))
        self.assertEqual((1, 2), self.counts())
        self.write('1.jsonl', '"}\n' + line())
        self.assertEqual((2, 2), self.counts())


class WriterTestCase(EventsDirTestCase):
    """The writer (root, for the CLI) never follows a planted link."""

    def mine(self) -> str:
        return os.path.join(self.dir, '%d%s' % (os.getpid(), events.SUFFIX))

    def test_a_planted_symlink_is_not_followed(self):
        target = os.path.join(self.tmp, 'shadow')
        with open(target, 'w') as victim:
            victim.write('root:x\n')
        os.symlink(target, self.mine())
        logs = self.useFixture(fixtures.FakeLogger(
            name='os_brick_cas.events', level=logging.WARNING))
        events.record(events.FLUSH, 1, events.OK)
        with open(target) as victim:
            self.assertEqual('root:x\n', victim.read())
        self.assertTrue(os.path.islink(self.mine()))
        # a planted link is worth a warning, not only a debug line
        self.assertIn('Could not record flush', logs.output)

    def test_a_planted_symlink_for_the_rotated_file_is_replaced(self):
        self.useFixture(fixtures.MonkeyPatch('os_brick_cas.events.MAX_BYTES',
                                             200))
        target = os.path.join(self.tmp, 'shadow')
        with open(target, 'w') as victim:
            victim.write('root:x\n')
        os.symlink(target, self.mine() + '.1')
        for _ in range(5):
            events.record(events.FLUSH, 1, events.OK)
        with open(target) as victim:
            self.assertEqual('root:x\n', victim.read())
        self.assertFalse(os.path.islink(self.mine() + '.1'))

    def test_a_planted_hard_link_is_not_written(self):
        target = os.path.join(self.tmp, 'shadow')
        with open(target, 'w') as victim:
            victim.write('root:x\n')
        os.link(target, self.mine())
        events.record(events.FLUSH, 1, events.OK)
        with open(target) as victim:
            self.assertEqual('root:x\n', victim.read())

    def test_a_planted_fifo_does_not_hang_the_writer(self):
        os.mkfifo(self.mine())
        self.addCleanup(lambda: os.close(os.open(
            self.mine(), os.O_RDONLY | os.O_NONBLOCK)))
        self.assertTrue(finishes(events.record, events.FLUSH, 1, events.OK),
                        'recording an event hangs on a FIFO')

    def test_an_events_directory_symlink_is_not_followed(self):
        os.rmdir(self.dir)
        elsewhere = os.path.join(self.tmp, 'etc')
        os.mkdir(elsewhere)
        os.symlink(elsewhere, self.dir)
        events.record(events.FLUSH, 1, events.OK)
        self.assertEqual([], os.listdir(elsewhere))

    def test_a_new_file_is_a_regular_0644_file_the_reader_reads(self):
        events.record(events.FLUSH, 1, events.OK)
        self.assertEqual(0o644, os.stat(self.mine()).st_mode & 0o777)
        self.assertEqual((1, 0), self.counts())
