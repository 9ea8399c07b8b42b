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

"""Flush and rbd call histograms from the event files of other processes.

nova-compute and the CLI append their timings to
``state_path``/events (see :mod:`os_brick_cas.events`). Each scrape reads
what was appended since the last one, file by file (followed by inode, so
a file rotated to ``.1`` is read to its end), and adds it to histograms
kept for the exporter's lifetime. The first scrape counts everything the
bounded log still holds; counters start again when the exporter restarts.

The directory may be writable by nova's user: only regular files are
read, never through a link (:func:`os_brick_cas.events.open_file`), at
most :data:`READ_LIMIT` bytes per file and scrape, and a line that is not
a valid event (:func:`os_brick_cas.events.parse`), or longer than
:data:`os_brick_cas.events.MAX_LINE`, is counted as invalid and skipped.
"""

import os
import threading
from typing import Iterator, Optional

from oslo_config import cfg
from oslo_log import log as logging
from prometheus_client import core as prom
from prometheus_client import registry

from os_brick_cas import events
from os_brick_cas import opts

LOG = logging.getLogger(__name__)
PREFIX = 'os_brick_cas_'
RESULTS = events.RESULTS
#: bytes read from one file per scrape (a file is rotated at 1 MiB)
READ_LIMIT = 2 * events.MAX_BYTES
RBD_OPERATIONS = ('map', 'unmap')
#: upper bounds (seconds); flushes of a large dirty cache take minutes
FLUSH_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600)
RBD_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class _Histogram:
    """Cumulative bucket counts and the sum of one label set."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        index = next((i for i, bound in enumerate(self.bounds)
                      if seconds <= bound), len(self.bounds))
        self.counts[index] += 1
        self.total += seconds

    def buckets(self) -> list[tuple[str, int]]:
        cumulative, out = 0, []
        for bound, count in zip(self.bounds + (float('inf'),), self.counts):
            cumulative += count
            out.append(('+Inf' if bound == float('inf') else str(bound),
                        cumulative))
        return out


class EventCollector(registry.Collector):
    """Flush and rbd call histograms of the processes on this host."""

    def __init__(self, conf: Optional[cfg.ConfigOpts] = None) -> None:
        self.conf = conf or cfg.CONF
        self.offsets: dict[tuple[int, int], int] = {}
        self.flush = {result: _Histogram(FLUSH_BUCKETS)
                      for result in RESULTS}
        self.drain = {result: _Histogram(FLUSH_BUCKETS)
                      for result in RESULTS}
        self.rbd = {(operation, result): _Histogram(RBD_BUCKETS)
                    for operation in RBD_OPERATIONS for result in RESULTS}
        self.bad_lines = 0
        #: files whose read stopped inside an over-long line
        self.skipping: set[tuple[int, int]] = set()
        self._lock = threading.Lock()

    def _add(self, line: bytes) -> None:
        event = events.parse(line)
        if event is None:
            self.bad_lines += 1
        elif event.kind == events.FLUSH:
            self.flush[event.result].observe(event.seconds)
        elif event.kind == events.DRAIN:
            self.drain[event.result].observe(event.seconds)
        else:
            operation = event.kind[len('rbd_'):]
            self.rbd[operation, event.result].observe(event.seconds)

    def _lines(self, key: tuple[int, int], data: bytes) -> int:
        """Add the complete lines of *data*; return the bytes consumed.

        An over-long line is counted once and skipped up to its newline,
        across reads if need be.
        """
        *lines, tail = data.split(b'\n')
        consumed = len(data) - len(tail)
        skipping = key in self.skipping
        for line in lines:
            if skipping:                # the end of an over-long line
                skipping = False
            elif len(line) > events.MAX_LINE:
                self.bad_lines += 1
            elif line.strip():
                self._add(line)
        if len(tail) > events.MAX_LINE:
            if not skipping:
                self.bad_lines += 1
            skipping, consumed = True, len(data)
        if skipping:
            self.skipping.add(key)
        else:
            self.skipping.discard(key)
        return consumed

    def _read(self, dir_fd: int, name: str,
              seen: set[tuple[int, int]]) -> None:
        fd = events.open_file(name, dir_fd, os.O_RDONLY)
        with os.fdopen(fd, 'rb') as log:
            info = os.fstat(fd)
            key = (info.st_dev, info.st_ino)
            seen.add(key)
            offset = self.offsets.get(key, 0)
            if info.st_size < offset:
                offset = 0          # a new file reusing the inode
                self.skipping.discard(key)
            log.seek(offset)
            data = log.read(READ_LIMIT)
        self.offsets[key] = offset + self._lines(key, data)

    def read_new(self) -> None:
        """Add the events appended since the last call."""
        directory = os.path.join(self.conf[opts.GROUP].state_path,
                                 'events')
        try:
            dir_fd = events.open_dir(directory)
        except FileNotFoundError:
            return
        except OSError as exc:
            LOG.warning('metrics: cannot read the event files in %s: %s',
                        directory, exc)
            return
        seen: set[tuple[int, int]] = set()
        try:
            names = sorted(os.listdir(dir_fd), reverse=True)  # .1 first
            for name in names:
                if events.SUFFIX not in name:
                    continue
                try:
                    self._read(dir_fd, name, seen)
                except FileNotFoundError:
                    continue            # pruned meanwhile
                except OSError as exc:
                    LOG.warning('metrics: skipped %s in %s: %s', name,
                                directory, exc)
        finally:
            os.close(dir_fd)
        self.offsets = {key: offset for key, offset in self.offsets.items()
                        if key in seen}
        self.skipping &= seen

    def collect(self) -> Iterator[prom.Metric]:
        with self._lock:
            self.read_new()
            families = [
                _family('flush_seconds',
                        'Flushes of a volume\'s dirty data by nova-compute '
                        'or the CLI (detach, flush in place), by result: ok, '
                        'failed, timeout (flush_timeout ran out).',
                        ['result'], {(r,): h for r, h in self.flush.items()}),
                _family('drain_seconds',
                        'Drains of a write-back core (pin to a no-allocation '
                        'IO class, then flush), by result: ok, failed, '
                        'timeout.',
                        ['result'], {(r,): h for r, h in self.drain.items()}),
                _family('rbd_call_seconds',
                        'rbd map/unmap calls of nova-compute or the CLI, by '
                        'operation and result: ok, failed, timeout '
                        '(rbd_timeout ran out).',
                        ['operation', 'result'], self.rbd)]
            bad = prom.CounterMetricFamily(
                PREFIX + 'event_lines_invalid',
                'Lines of the event files that were skipped: not JSON, '
                'longer than %d bytes, or not an event (unknown kind or '
                'result, seconds not a number).' % events.MAX_LINE)
            bad.add_metric([], self.bad_lines)
        yield from families
        yield bad


def _family(name: str, text: str, labels: list[str],
            histograms: dict) -> prom.HistogramMetricFamily:
    """A histogram family with one series per label-values key."""
    family = prom.HistogramMetricFamily(PREFIX + name, text, labels=labels)
    for values, histogram in histograms.items():
        family.add_metric(list(values), histogram.buckets(), histogram.total)
    return family
