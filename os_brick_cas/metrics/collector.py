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

"""The Prometheus collector: casadm's statistics of each cache and volume.

Each scrape lists the cache instances (``casadm -L``) and reads the
statistics of every instance and core (``casadm -P``); the values are
casadm's own counters, so they reset when a cache instance is restarted
(Prometheus' ``rate()`` and ``increase()`` handle that). A core's volume
id comes from its by-id name, the instance uuid from the QEMU process
holding its ``/dev/casX-Y`` open (see :mod:`.qemu`).

No failure fails the scrape: each casadm call is bounded by the
exporter's ``casadm_timeout`` (seconds, well under a scrape timeout),
``os_brick_cas_up`` drops to 0 and ``os_brick_cas_collect_errors_total``
grows when the caches cannot be listed, a call times out or the
collection fails for any other reason (the privileged helper cannot start,
an unexpected error); ``os_brick_cas_collect_error_info`` then names the
operation and the reason, also logged, and
``os_brick_cas_casadm_errors_total`` counts every failed call. One
collection runs at a time and is reused for ``cache_seconds``.
"""

import time
from typing import Callable, Iterator, Optional, TypeVar

from oslo_config import cfg
from oslo_log import log as logging
from prometheus_client import core as prom
from prometheus_client import registry

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas import lifecycle
from os_brick_cas.metrics import opts
from os_brick_cas.metrics import qemu
from os_brick_cas.metrics import singleflight
from os_brick_cas.opencas import casadm_output
from os_brick_cas import report
from os_brick_cas import share_usage

LOG = logging.getLogger(__name__)
PREFIX = 'os_brick_cas_'
BLOCK = 4096
CACHE_LABELS = ['cache_id']
CORE_LABELS = ['cache_id', 'core_id', 'volume_id', 'rbd_image',
               'instance_uuid']
T = TypeVar('T')
#: the longest reason os_brick_cas_collect_error_info carries
REASON_CHARS = 200

#: request counters: (metric, help, casadm titles that add up to it)
REQUESTS = [
    ('read_hits', 'Reads served from the cache.',
     ('Read hits [Requests]',)),
    ('read_misses', 'Reads that went (partly) to Ceph.',
     ('Read partial misses [Requests]', 'Read full misses [Requests]')),
    ('write_hits', 'Writes to lines already in the cache.',
     ('Write hits [Requests]',)),
    ('write_misses', 'Writes to lines not (fully) in the cache.',
     ('Write partial misses [Requests]', 'Write full misses [Requests]')),
    ('pass_through_requests', 'Requests that bypassed the cache.',
     ('Pass-Through reads [Requests]', 'Pass-Through writes [Requests]')),
]
#: I/O errors as casadm counts them: (device, direction, title)
IO_ERRORS = [
    ('cache', 'read', 'Cache read errors [Requests]'),
    ('cache', 'write', 'Cache write errors [Requests]'),
    ('core', 'read', 'Core read errors [Requests]'),
    ('core', 'write', 'Core write errors [Requests]'),
]
#: gauges in 4 KiB blocks, exported in bytes: (metric, help, title)
USAGE = [
    ('occupancy_bytes', 'Cache space holding this data.',
     'Occupancy [4KiB Blocks]'),
    ('dirty_bytes', 'Data in the cache not yet written to Ceph.',
     casadm_output.DIRTY_BLOCKS),
]


def _value(stats: dict[str, str], title: str) -> Optional[float]:
    raw = stats.get(title, '').strip()
    try:
        return float(raw)
    except ValueError:
        return None


def _attachment(core_device: str) -> str:
    try:
        return report.attachment_of(core_device) or ''
    except (OSError, ValueError, KeyError) as exc:
        LOG.warning('metrics: cannot read the ownership record of %s: %s',
                    core_device, exc)
        return ''


def reason_of(exc: BaseException) -> str:
    """One short line naming *exc*: its class and message."""
    text = ' '.join(str(exc).split())
    reason = '%s: %s' % (type(exc).__name__, text) if text else \
        type(exc).__name__
    return reason[:REASON_CHARS]


class _Families:
    """The metric families of one scrape, filled cache by cache."""

    def __init__(self) -> None:
        self.up = prom.GaugeMetricFamily(
            PREFIX + 'up', '1 when casadm listed the cache instances '
            'and the collection completed.')
        self.error = prom.GaugeMetricFamily(
            PREFIX + 'collect_error_info',
            'Always 1, only when os_brick_cas_up is 0: the operation that '
            'failed first in the latest collection and why (e.g. casadm '
            'timed out, the privileged helper could not start).',
            labels=['operation', 'reason'])
        self.cache_info = prom.GaugeMetricFamily(
            PREFIX + 'cache_info', 'A cache instance, its mode and state.',
            labels=CACHE_LABELS + ['mode', 'status', 'device'])
        self.cache_running = prom.GaugeMetricFamily(
            PREFIX + 'cache_running',
            '1 when the cache instance is Running (not Incomplete, '
            'Stopping, Initializing...).', labels=CACHE_LABELS)
        self.core_active = prom.GaugeMetricFamily(
            PREFIX + 'core_active',
            '1 when the core is active, 0 when inactive (its RBD device '
            'is missing; its dirty data cannot reach Ceph).',
            labels=CORE_LABELS)
        self.attachment = prom.GaugeMetricFamily(
            PREFIX + 'core_attachment_info',
            'Always 1; the Cinder attachment whose data the core caches, '
            'from the host\'s ownership record (empty: no record, e.g. a '
            'core added before records were kept).',
            labels=CORE_LABELS + ['attachment'])
        self.drained = prom.GaugeMetricFamily(
            PREFIX + 'core_drained',
            '1 when the core is drained (pinned to a no-allocation IO '
            'class: its writes go straight to Ceph, it cannot get dirty).',
            labels=CORE_LABELS)
        self.dirty_for = prom.GaugeMetricFamily(
            PREFIX + 'core_dirty_for_seconds',
            'Seconds since the core was last clean (0 when clean).',
            labels=CORE_LABELS)
        self.drift = prom.GaugeMetricFamily(
            PREFIX + 'drift',
            'Always 1; a volume or cache instance whose real state differs '
            'from its record (kind: table = IO-class table loaded by hand, '
            'gone-class, inactive, held = a drain nova holds that the host '
            'does not, journal = an interrupted drain/undrain, quarantine = '
            'a journal file that is not a valid record (subject: its path), '
            'unchecked = a comparison that could not be made). '
            '"os-brick-cas doctor" says what to do.',
            labels=['subject', 'kind'])
        self.share = prom.GaugeMetricFamily(
            PREFIX + 'core_share_ratio',
            'The cache share (0..1 of the instance) the core\'s IO class '
            'holds now; absent when it holds none.', labels=CORE_LABELS)
        self.share_asked = prom.GaugeMetricFamily(
            PREFIX + 'core_share_asked_ratio',
            'The cache share (0..1) the volume\'s type asks for '
            '(cas:cache_share); absent when it asks for none.',
            labels=CORE_LABELS)
        self.share_lost = prom.GaugeMetricFamily(
            PREFIX + 'core_share_lost',
            '1 when the volume asked for a cache share and holds none '
            'because the instance\'s IO-class budget (32 classes, 100%) is '
            'spent (not because it is drained); it is cached uncapped. '
            '"os-brick-cas doctor" says what to do.', labels=CORE_LABELS)
        self.share_usage = {
            name: prom.GaugeMetricFamily(
                PREFIX + 'core_share_' + name, text, labels=CORE_LABELS)
            for name, text in (
                ('cap_bytes', 'The cache space the core\'s share caps it '
                 'at: ceil(share x cache lines).'),
                ('occupancy_bytes', 'Cache space the core\'s share IO class '
                 'holds (at most its cap).'),
                ('dirty_bytes', 'Dirty data in the core\'s share IO '
                 'class.'))}
        self.share_pass_through = prom.CounterMetricFamily(
            PREFIX + 'core_share_pass_through_reads',
            'Reads of the core\'s share IO class that bypassed the cache '
            '(a class at its cap whose own clean lines are not enough '
            'reads from Ceph; sequential cut-off counts too). Open CAS '
            'counts no evictions per class.', labels=CORE_LABELS)
        self.usage = {
            (level, name): prom.GaugeMetricFamily(
                '%s%s_%s' % (PREFIX, level, name), text, labels=labels)
            for level, labels in (('cache', CACHE_LABELS),
                                  ('core', CORE_LABELS))
            for name, text, _ in USAGE}
        self.requests = {
            (level, name): prom.CounterMetricFamily(
                '%s%s_%s' % (PREFIX, level, name), text, labels=labels)
            for level, labels in (('cache', CACHE_LABELS),
                                  ('core', CORE_LABELS))
            for name, text, _ in REQUESTS}
        self.io_errors = {
            level: prom.CounterMetricFamily(
                '%s%s_io_errors' % (PREFIX, level),
                'I/O errors casadm counted, by device (cache: the SSD, '
                'core: the RBD device) and direction.',
                labels=labels + ['device', 'direction'])
            for level, labels in (('cache', CACHE_LABELS),
                                  ('core', CORE_LABELS))}

    def add_stats(self, level: str, labels: list[str],
                  stats: dict[str, str]) -> None:
        for name, _, title in USAGE:
            value = _value(stats, title)
            if value is not None:
                self.usage[level, name].add_metric(labels, value * BLOCK)
        for name, _, titles in REQUESTS:
            values = [_value(stats, title) for title in titles]
            if None not in values:
                self.requests[level, name].add_metric(labels, sum(values))
        for device, direction, title in IO_ERRORS:
            value = _value(stats, title)
            if value is not None:
                self.io_errors[level].add_metric(
                    labels + [device, direction], value)

    def add_share(self, labels: list[str], share: share_usage.CoreShare
                  ) -> None:
        """The core's cache share: asked, held, its use against the cap."""
        if share.asked is not None:
            self.share_asked.add_metric(labels, share.asked / 100)
            self.share_lost.add_metric(labels, 1 if share.lost else 0)
        if share.held is None:
            return
        self.share.add_metric(labels, share.held / 100)
        for name, blocks in (('cap_bytes', share.cap_blocks),
                             ('occupancy_bytes', share.occupancy_blocks),
                             ('dirty_bytes', share.dirty_blocks)):
            if blocks is not None:
                self.share_usage[name].add_metric(labels, blocks * BLOCK)
        if share.pass_through_reads is not None:
            self.share_pass_through.add_metric(labels,
                                               share.pass_through_reads)

    def all(self) -> Iterator[prom.Metric]:
        yield from (self.up, self.error, self.cache_info, self.cache_running,
                    self.core_active, self.attachment, self.drained,
                    self.dirty_for, self.drift, self.share,
                    self.share_asked, self.share_lost)
        yield from self.share_usage.values()
        yield self.share_pass_through
        yield from self.usage.values()
        yield from self.requests.values()
        yield from self.io_errors.values()


class _ScrapeCasadm(casadm_mod.Casadm):
    """casadm bounded by the exporter's own, short ``casadm_timeout``."""

    @property
    def _timeout(self) -> int:
        return self.conf[opts.GROUP].casadm_timeout


class _Collection:
    """One collection: its casadm calls stop after the first time-out.

    A casadm that hangs once hangs for the next call too; skipping the
    rest keeps the whole collection within about one ``casadm_timeout``.
    """

    def __init__(self, collector: 'CasCollector') -> None:
        self.collector = collector
        self.timed_out = False
        #: (operation, reason) of the first failure: os_brick_cas_up is 0
        self.failure: Optional[tuple[str, str]] = None

    def fail(self, operation: str, reason: str) -> None:
        """Record a failure that makes the whole collection fail."""
        if self.failure is None:
            self.failure = (operation, reason)

    def call(self, operation: str, func: Callable[..., T],
             *args: object) -> Optional[T]:
        errors, seconds = self.collector.errors, self.collector.seconds
        if self.timed_out:
            errors[operation] = errors.get(operation, 0) + 1
            return None
        start = time.monotonic()
        try:
            return func(*args)
        except exception.CasError as exc:
            errors[operation] = errors.get(operation, 0) + 1
            self.timed_out = isinstance(exc, exception.CasadmTimedOut)
            LOG.warning('metrics: casadm %s failed: %s', operation, exc)
            if self.timed_out or operation == 'list':
                self.fail(operation, reason_of(exc))
            return None
        except Exception as exc:
            # not casadm's answer: e.g. the privileged helper could not
            # start (privsep's FailedToDropPrivileges); no later call would
            # fare better
            errors[operation] = errors.get(operation, 0) + 1
            self.timed_out = True
            self.fail(operation, reason_of(exc))
            LOG.error('metrics: %s failed, os_brick_cas_up is 0: %s',
                      operation, reason_of(exc))
            LOG.debug('metrics: %s failed', operation, exc_info=True)
            return None
        finally:
            count, total = seconds.get(operation, (0, 0.0))
            seconds[operation] = (count + 1,
                                  total + time.monotonic() - start)


class CasCollector(registry.Collector):
    """Metrics of every Open CAS cache instance and core on this host.

    Collections are single-flight and reused for ``cache_seconds`` (see
    :mod:`.singleflight`); across them it keeps how many casadm calls
    failed and how long they took, per casadm operation, and how many
    collections failed.
    """

    def __init__(self, conf: Optional[cfg.ConfigOpts] = None,
                 casadm: Optional[casadm_mod.Casadm] = None) -> None:
        self.conf = conf or cfg.CONF
        self.casadm = casadm or _ScrapeCasadm(self.conf)
        self.errors: dict[str, int] = {}
        self.seconds: dict[str, tuple[int, float]] = {}
        self.failed_collections = 0
        self._flight = singleflight.SingleFlight(
            self._collect, lambda: self.conf[opts.GROUP].cache_seconds)

    def _instances(self, caches: list[casadm_output.CacheInstance]
                   ) -> dict[str, str]:
        group = self.conf[opts.GROUP]
        if not group.instance_uuids:
            return {}
        devices = [core.exported for cache in caches for core in cache.cores
                   if core.exported]
        try:
            return qemu.instances_by_device(devices, group.proc_root,
                                            group.qemu_user)
        except OSError as exc:
            LOG.warning('metrics: cannot read %s for instance uuids: %s',
                        group.proc_root, exc)
            return {}

    def _add_cache(self, families: _Families, run: _Collection,
                   cache: casadm_output.CacheInstance,
                   instances: dict[str, str],
                   tables: dict[int, list[casadm_output.IoClass]]) -> None:
        cache_labels = [str(cache.cache_id)]
        families.cache_info.add_metric(
            cache_labels + [cache.current_mode, cache.status, cache.device],
            1)
        families.cache_running.add_metric(
            cache_labels, 1 if cache.status == 'Running' else 0)
        stats = run.call('stats', self.casadm.stats, cache.cache_id)
        if stats is not None:
            families.add_stats('cache', cache_labels, stats)
        drained: set[int] = set()
        shares = None
        if cache.cores:
            # every instance's table: drift reads them all anyway
            table = run.call('io_classes', self.casadm.list_io_classes,
                             cache.cache_id)
            if table is not None:
                tables[cache.cache_id] = table
                shares = run.call('io_class_stats',
                                  share_usage.instance_shares, self.casadm,
                                  cache, stats or {}, table)
            if cache.current_mode in ('wb', 'wo'):
                drained = drain.drained_cores(table or [])
        for core in cache.cores:
            image, volume_id = report.rbd_image_of(core.device)
            labels = cache_labels + [
                str(core.core_id), volume_id or '', image or '',
                instances.get(core.exported or '', '')]
            families.core_active.add_metric(labels, 1 if core.active else 0)
            families.attachment.add_metric(
                labels + [_attachment(core.device)], 1)
            families.drained.add_metric(
                labels, 1 if core.core_id in drained else 0)
            if shares is not None and core.core_id in shares.cores:
                families.add_share(labels, shares.cores[core.core_id])
            stats = run.call('stats', self.casadm.stats, cache.cache_id,
                             core.core_id)
            if stats is None:
                continue
            families.add_stats('core', labels, stats)
            families.dirty_for.add_metric(
                labels, _value(stats, 'Dirty for [s]') or 0)

    def _collect(self) -> list[prom.Metric]:
        """One collection, as the list of families every waiter shares.

        Never raises (a raising collector is an HTTP 500 for the whole
        scrape): whatever fails makes ``os_brick_cas_up`` 0 with the
        reason in ``os_brick_cas_collect_error_info`` and a log line.
        """
        families = _Families()
        run = _Collection(self)
        try:
            caches = run.call('list', self.casadm.list_caches)
            if caches:
                instances = self._instances(caches)
                tables: dict[int, list[casadm_output.IoClass]] = {}
                for cache in caches:
                    self._add_cache(families, run, cache, instances, tables)
                self._add_drift(families, run, caches, tables)
        except Exception as exc:
            families = _Families()
            run.fail('collect', reason_of(exc))
            LOG.exception('metrics: the collection failed, os_brick_cas_up '
                          'is 0: %s', reason_of(exc))
        if run.failure is not None:
            self.failed_collections += 1
            families.error.add_metric(list(run.failure), 1)
        families.up.add_metric([], 0 if run.failure else 1)
        return list(families.all()) + self._own_metrics()

    def _add_drift(self, families: _Families, run: _Collection,
                   caches: list[casadm_output.CacheInstance],
                   tables: dict[int, list[casadm_output.IoClass]]) -> None:
        """lifecycle.drift() from this scrape's listing (no second -L)."""
        try:
            drifts = run.call('drift', lifecycle.drift, self.casadm, None,
                              caches, tables)
        except (OSError, cfg.Error) as exc:
            # e.g. the life-cycle journal under state_path is not readable
            LOG.warning('metrics: cannot check for drift: %s', exc)
            drifts = None
        for found in drifts or []:
            families.drift.add_metric([found.volume, found.kind], 1)

    def _own_metrics(self) -> list[prom.Metric]:
        collect_errors = prom.CounterMetricFamily(
            PREFIX + 'collect_errors',
            'Collections that failed: casadm could not list the caches, '
            'a casadm call ran out of casadm_timeout or the collection '
            'failed otherwise (os_brick_cas_up was 0; '
            'os_brick_cas_collect_error_info says why).')
        collect_errors.add_metric([], self.failed_collections)
        errors = prom.CounterMetricFamily(
            PREFIX + 'casadm_errors',
            'casadm calls of the exporter that failed or were skipped after '
            'a time-out, by operation.',
            labels=['operation'])
        calls = prom.SummaryMetricFamily(
            PREFIX + 'casadm_call_seconds',
            'Time the exporter\'s casadm calls took, by operation.',
            labels=['operation'])
        for operation in sorted(self.seconds.keys() | self.errors.keys()):
            errors.add_metric([operation], self.errors.get(operation, 0))
            count, total = self.seconds.get(operation, (0, 0.0))
            calls.add_metric([operation], count, total)
        return [collect_errors, errors, calls]

    def collect(self) -> Iterator[prom.Metric]:
        yield from self._flight.get()
