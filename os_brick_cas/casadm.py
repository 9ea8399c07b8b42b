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

"""How to talk to casadm: typed records, CSV parsing and error mapping.

No policy lives here. Root work is done by the entry points in
:mod:`os_brick_cas.privileged.casadm`; this module validates arguments
before anything is sent to the daemon, parses what casadm printed with the
csv module, and turns non-zero exits into specific exceptions.
"""

import csv
import dataclasses
import io
import os
import re
from typing import Callable, Optional

from oslo_config import cfg
from oslo_log import log as logging
import tenacity

from os_brick_cas import exception
from os_brick_cas import labels
from os_brick_cas import opts
from os_brick_cas.privileged import casadm as priv_casadm
from os_brick_cas import validation

LOG = logging.getLogger(__name__)

LIST_HEADER = ['type', 'id', 'disk', 'status', 'write policy', 'device']
NO_CACHES = 'No caches running'
DIRTY_BLOCKS = 'Dirty [4KiB Blocks]'
_ADDED = re.compile(r'Successfully added core (\d+) to cache instance (\d+)')


@dataclasses.dataclass(frozen=True)
class Core:
    """One core of a cache instance as ``casadm -L -b`` shows it."""

    cache_id: int
    core_id: int
    device: str
    status: str
    exported: Optional[str]

    @property
    def active(self) -> bool:
        return self.status != 'Inactive'

    @property
    def label(self) -> str:
        """``core 3 of cache instance 1`` (:func:`labels.core`)."""
        return labels.core(self.cache_id, self.core_id)


@dataclasses.dataclass(frozen=True)
class CacheInstance:
    """One cache instance with its cores."""

    cache_id: int
    device: str
    status: str
    mode: str
    cores: tuple[Core, ...] = ()

    @property
    def current_mode(self) -> str:
        """The mode now in force: 'wb->wt' (any flush running) is 'wt'."""
        return self.mode.rsplit('->', 1)[-1]

    def find_core(self, device: str) -> Optional[Core]:
        for core in self.cores:
            if core.device == device:
                return core
        return None


def parse_list(text: str) -> list[CacheInstance]:
    """Parse ``casadm -L -o csv`` output into cache instances."""
    if text.strip() == NO_CACHES:
        return []
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [c.strip() for c in rows[0]] != LIST_HEADER:
        raise exception.CasadmCommandFailed(
            operation='--list-caches', exit_code=0,
            detail='unexpected output %r' % text[:200])
    caches: list[CacheInstance] = []
    cores: list[Core] = []
    current: Optional[tuple[int, str, str, str]] = None

    def close() -> None:
        if current is not None:
            caches.append(CacheInstance(*current, cores=tuple(cores)))

    for row in rows[1:]:
        if not row:
            continue
        kind, ident, disk, status, policy, device = (row + [''] * 6)[:6]
        if kind == 'cache':
            close()
            cores = []
            current = (int(ident), disk, status, policy)
        elif kind == 'core' and current is not None and ident != '-':
            cores.append(Core(cache_id=current[0], core_id=int(ident),
                              device=disk, status=status,
                              exported=None if device == '-' else device))
        # 'core pool' rows and detached pool devices are not ours to manage
    close()
    return caches


def parse_core_pool(text: str) -> list[str]:
    """Devices in Open CAS's core pool (``core,-,<device>,Detached``).

    A try-add for a cache that is not running parks its device there, held
    open, so a later ``--add-core`` of it fails until --remove-detached.
    """
    if text.strip() == NO_CACHES:
        return []
    return [row[2] for row in csv.reader(io.StringIO(text))
            if len(row) >= 4 and row[0] == 'core' and row[1] == '-']


def parse_stats(text: str) -> dict[str, str]:
    """Parse ``casadm -P -o csv`` (header line + one value line) by name."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1:
        raise exception.CasadmCommandFailed(
            operation='--stats', exit_code=0,
            detail='expected one line of values, got %r' % text[:200])
    return {key.strip(): (value or '').strip() for key, value in
            rows[0].items()}


@dataclasses.dataclass(frozen=True)
class IoClass:
    """One row of an instance's IO-class table (``-C -L -o csv``)."""

    class_id: int
    name: str
    priority: Optional[int]     # None: pinned
    allocation: float           # 0..1; 0 = the class never maps lines


def parse_io_classes(text: str) -> list[IoClass]:
    """Parse ``casadm --io-class --list -o csv``."""
    table = []
    for row in csv.DictReader(io.StringIO(text)):
        row = {key.strip(): (value or '').strip()
               for key, value in row.items()}
        try:
            table.append(IoClass(
                class_id=int(row['IO class id']),
                name=row['IO class name'],
                priority=(int(row['Eviction priority'])
                          if row['Eviction priority'] else None),
                allocation=float(row['Allocation'])))
        except (KeyError, ValueError):
            raise exception.CasadmCommandFailed(
                operation='--io-class --list', exit_code=0,
                detail='unexpected output %r' % text[:200])
    return table


@dataclasses.dataclass(frozen=True)
class IoClassUsage:
    """One IO class's use of its instance (``-P -i I -d -o csv``).

    Counts are casadm's 4 KiB blocks, summed over the instance's cores.
    Open CAS reports no eviction count per class; reads over a class's cap
    go pass-through and count as *pass_through_reads*.
    """

    class_id: int
    name: str
    #: the class's cap in whole percent ("Max size")
    max_percent: Optional[int]
    occupancy_blocks: int
    dirty_blocks: int
    pass_through_reads: Optional[int] = None


def _count(row: dict[str, str], title: str) -> Optional[int]:
    """A whole number cell (``25%`` counts as 25), None if absent."""
    raw = row.get(title, '').rstrip('%')
    try:
        return int(float(raw))
    except ValueError:
        return None


def parse_io_class_stats(text: str) -> list[IoClassUsage]:
    """Parse ``casadm -P -i I -d -o csv``: one header, a line per class.

    Columns are read by name (they differ between releases).
    """
    usage = []
    for row in csv.DictReader(io.StringIO(text)):
        row = {key.strip(): (value or '').strip()
               for key, value in row.items() if key is not None}
        try:
            usage.append(IoClassUsage(
                class_id=int(row['IO class ID']),
                name=row['IO class name'],
                max_percent=_count(row, 'Max size'),
                occupancy_blocks=int(float(row['Occupancy [4KiB Blocks]'])),
                dirty_blocks=int(float(row[DIRTY_BLOCKS])),
                pass_through_reads=_count(
                    row, 'Pass-Through reads [Requests]')))
        except (KeyError, ValueError):
            raise exception.CasadmCommandFailed(
                operation='--stats --io-class-id', exit_code=0,
                detail='unexpected output %r' % text[:200])
    return usage


# (substring of casadm's output, exception factory)
_ERRORS: list[tuple[str, Callable[..., exception.CasError]]] = [
    ('Try again', lambda ctx, detail: exception.CasadmBusy(
        operation=ctx.get('operation'), exit_code=1, detail=detail)),
    ('Another flush operation in progress', lambda ctx, detail:
        exception.CasadmBusy(operation=ctx.get('operation'), exit_code=1,
                             detail=detail)),
    ('/dev/cas_ctrl not found', lambda ctx, detail:
        exception.CasModuleNotLoaded(detail=detail)),
    ('Is the kernel module loaded', lambda ctx, detail:
        exception.CasModuleNotLoaded(detail=detail)),
    ('Cache ID does not exist', lambda ctx, detail:
        exception.CacheNotFound(cache_id=ctx.get('cache_id'))),
    ('is already cached', lambda ctx, detail:
        exception.CoreAlreadyCached(device=ctx.get('device'), detail=detail)),
    ('Device already added as a core', lambda ctx, detail:
        exception.CoreAlreadyCached(device=ctx.get('device'), detail=detail)),
    ('Device opens or mount are pending', lambda ctx, detail:
        exception.DeviceBusy(device=ctx.get('device'), detail=detail)),
    ('exclusively', lambda ctx, detail:
        exception.DeviceBusy(device=ctx.get('device'), detail=detail)),
    # -R whose second, uninterruptible flush failed: core left detached
    ('Failed to remove core. See dmesg', lambda ctx, detail:
        exception.CoreRemovalFailed(cache_id=ctx.get('cache_id'),
                                    core=ctx.get('core_id'),
                                    detail=detail)),
    ('Core is inactive', lambda ctx, detail:
        exception.CoreInactive(cache_id=ctx.get('cache_id'),
                               core=ctx.get('core_id'),
                               device=ctx.get('device'))),
    ('Core device is in inactive state', lambda ctx, detail:
        exception.CoreInactive(cache_id=ctx.get('cache_id'),
                               core=ctx.get('core_id'),
                               device=ctx.get('device'))),
    # -P: statistics_model.c prints its own refusals ('Cache Id N not
    # running', 'No such core device in cache.'); get-param: 'Cache id N'
    ('not running', lambda ctx, detail:
        exception.CacheNotFound(cache_id=ctx.get('cache_id'))),
    ('No such core device in cache', lambda ctx, detail:
        exception.CoreNotFound(cache_id=ctx.get('cache_id'),
                               core=ctx.get('core_id'), detail=detail)),
    ('Core ID does not exist', lambda ctx, detail:
        exception.CoreNotFound(cache_id=ctx.get('cache_id'),
                               core=ctx.get('core_id'), detail=detail)),
    ('Core is active. To manage', lambda ctx, detail:
        exception.CoreActive(cache_id=ctx.get('cache_id'),
                             core=ctx.get('core_id'), detail=detail)),
    ('Old metadata found on device', lambda ctx, detail:
        exception.CacheDeviceHasMetadata(device=ctx.get('device'),
                                         detail=detail)),
    # before v24.9 '-F' takes no '-j' (per-core flush was '-E')
    ('Unrecognized option', lambda ctx, detail: exception.CasadmTooOld(
        operation=ctx.get('operation'), exit_code=1, detail=detail)),
    # -F/-T of an Incomplete cache (a per-core flush is not refused)
    ('Cache is in incomplete state', lambda ctx, detail:
        exception.CacheNotRunning(
            cache_id=ctx.get('cache_id'), status='Incomplete',
            advice='casadm refuses to flush a whole cache while one of its '
                   'cores is inactive (%s). Attach the volumes of its '
                   'inactive cores (os-brick-cas status lists them) or '
                   'flush core by core.' % detail)),
]


def _detail(out: str, err: str) -> str:
    text = ' '.join(line.strip() for line in (err + '\n' + out).splitlines()
                    if line.strip())
    return text or 'no message'


def _check(operation: str, result: priv_casadm.Result, **ctx) -> str:
    """Return stdout of a successful call or raise the matching error."""
    exit_code, out, err = result
    if exit_code == 0:
        return out
    if exit_code == priv_casadm.NOT_FOUND:
        raise exception.CasadmNotFound()
    if exit_code == priv_casadm.TIMED_OUT:
        raise exception.CasadmTimedOut(operation=operation,
                                       timeout=ctx.get('timeout'))
    detail = _detail(out, err)
    ctx.setdefault('operation', operation)
    LOG.debug('casadm %s failed with %s: %s', operation, exit_code, detail)
    for needle, factory in _ERRORS:
        if needle in detail:
            raise factory(ctx, detail)
    raise exception.CasadmCommandFailed(operation=operation,
                                        exit_code=exit_code, detail=detail)


#: casadm's transient refusals are retried a few times, briefly.
_retry_busy = tenacity.retry(
    retry=tenacity.retry_if_exception_type(exception.CasadmBusy),
    stop=tenacity.stop_after_attempt(4),
    wait=tenacity.wait_exponential(multiplier=0.25, max=2),
    before_sleep=tenacity.before_sleep_log(LOG, logging.WARNING),
    reraise=True)


#: udev probes a cached device when a writer closes it (blkid, the "watch"
#: option of the stock block rules): a removal racing that probe is refused
#: with "Device opens or mount are pending". Retried for about 8 s (7
#: calls); each refused removal has already flushed, so a retry only
#: flushes again.
REMOVE_ATTEMPTS = 7
_retry_opened = tenacity.retry(
    retry=tenacity.retry_if_exception_type(exception.DeviceBusy),
    stop=tenacity.stop_after_attempt(REMOVE_ATTEMPTS),
    wait=tenacity.wait_exponential(multiplier=0.25, max=2),
    before_sleep=tenacity.before_sleep_log(LOG, logging.WARNING),
    reraise=True)


def exported_path(cache_id: int, core_id: int) -> str:
    """The cached block device Open CAS exports for a core."""
    return '/dev/cas%d-%d' % (cache_id, core_id)


_EXPORTED = re.compile(r'/dev/cas(?P<cache>\d+)-(?P<core>\d+)')


def core_of_exported(path: str) -> Optional[tuple[int, int]]:
    """(cache id, core id) if *path* (or its target) is an exported core."""
    for candidate in (path, os.path.realpath(path)):
        match = _EXPORTED.fullmatch(candidate)
        if match:
            return int(match.group('cache')), int(match.group('core'))
    return None


class Casadm(object):
    """The casadm operations os-brick-cas needs, with typed results.

    Every call is bounded: ``[os_brick_cas] casadm_timeout`` for short
    calls (CasadmTimedOut), ``flush_timeout`` for flushes and core
    removals, which run on the flush privsep daemon.
    """

    def __init__(self, conf: Optional[cfg.ConfigOpts] = None):
        self.conf = conf or cfg.CONF

    @property
    def _timeout(self) -> int:
        return self.conf[opts.GROUP].casadm_timeout

    @property
    def _flush_timeout(self) -> int:
        return self.conf[opts.GROUP].flush_timeout

    def list_caches(self) -> list[CacheInstance]:
        """All cache instances and their cores (by-id paths)."""
        timeout = self._timeout
        return parse_list(_check('--list-caches',
                                 priv_casadm.list_caches(timeout),
                                 timeout=timeout))

    def core_pool(self) -> list[str]:
        """Devices parked in the core pool (by-id paths)."""
        timeout = self._timeout
        return parse_core_pool(_check('--list-caches',
                                      priv_casadm.list_caches(timeout),
                                      timeout=timeout))

    def remove_detached(self, device: str) -> None:
        """Release *device* from the core pool (it holds no cache data)."""
        device = validation.by_id_path(device)
        timeout = self._timeout
        _check('--remove-detached',
               priv_casadm.remove_detached(device, timeout),
               device=device, timeout=timeout)

    @staticmethod
    def find_core(caches: list[CacheInstance],
                  device: str) -> Optional[Core]:
        """The core added with by-id path *device*, in any instance."""
        for cache in caches:
            core = cache.find_core(device)
            if core is not None:
                return core
        return None

    @_retry_busy
    def add_core(self, cache_id: int, device: str) -> Core:
        """Add *device* to *cache_id*; casadm picks the core id."""
        cache_id = validation.cache_id(cache_id)
        device = validation.by_id_path(device)
        timeout = self._timeout
        out = _check('--add-core',
                     priv_casadm.add_core(cache_id, device, timeout),
                     cache_id=cache_id, device=device, timeout=timeout)
        match = _ADDED.search(out)
        if not match:
            raise exception.CasadmCommandFailed(
                operation='--add-core', exit_code=0,
                detail='no core id in %r' % out)
        core_id = int(match.group(1))
        return Core(cache_id=cache_id, core_id=core_id, device=device,
                    status='Active',
                    exported=exported_path(cache_id, core_id))

    @_retry_busy
    def try_add_core(self, cache_id: int, core_id: int, device: str) -> Core:
        """Re-activate an inactive core on its (returned) device.

        casadm exits 0 also when *cache_id* is not running: the device is
        then parked in the core pool (see :func:`parse_core_pool`).
        """
        cache_id = validation.cache_id(cache_id)
        core_id = validation.core_id(core_id)
        device = validation.by_id_path(device)
        timeout = self._timeout
        _check('--try-add', priv_casadm.try_add_core(cache_id, core_id,
                                                     device, timeout),
               cache_id=cache_id, core_id=core_id, device=device,
               timeout=timeout)
        return Core(cache_id=cache_id, core_id=core_id, device=device,
                    status='Active',
                    exported=exported_path(cache_id, core_id))

    @_retry_opened
    @_retry_busy
    def remove_core(self, core: Core) -> None:
        """Remove an active core (casadm flushes it first; never forced).

        Bounded by flush_timeout; when that runs out the removal's flush
        is interrupted and the core stays, with its dirty data. A removal
        refused because the exported device is open is retried for about
        eight seconds (udev's probe after a writer closes it), then raises
        DeviceBusy with the core in place.
        """
        timeout = self._flush_timeout
        _check('--remove-core',
               priv_casadm.remove_core(validation.cache_id(core.cache_id),
                                       validation.core_id(core.core_id),
                                       timeout),
               cache_id=core.cache_id, core_id=core.core_id,
               device=core.exported or core.device, timeout=timeout)

    @_retry_busy
    def remove_inactive_core(self, core: Core) -> None:
        """Remove an inactive core; casadm refuses while it is dirty."""
        timeout = self._timeout
        _check('--remove-inactive',
               priv_casadm.remove_inactive_core(
                   validation.cache_id(core.cache_id),
                   validation.core_id(core.core_id), timeout),
               cache_id=core.cache_id, core_id=core.core_id,
               device=core.device, timeout=timeout)

    def list_io_classes(self, cache_id: int) -> list[IoClass]:
        """The IO-class table of *cache_id*."""
        cache_id = validation.cache_id(cache_id)
        timeout = self._timeout
        out = _check('--io-class --list',
                     priv_casadm.list_io_classes(cache_id, timeout),
                     cache_id=cache_id, timeout=timeout)
        return parse_io_classes(out)

    def load_io_classes(self, cache_id: int, table: list[IoClass]) -> None:
        """Replace the whole IO-class table of *cache_id* with *table*."""
        cache_id = validation.cache_id(cache_id)
        timeout = self._timeout
        _check('--io-class --load-config',
               priv_casadm.load_io_classes(
                   cache_id, [(c.class_id, c.name, c.priority, c.allocation)
                              for c in table], timeout),
               cache_id=cache_id, timeout=timeout)

    def discard_core(self, core: Core) -> None:
        """Remove *core* without flushing (drops its dirty data).

        Only ``os-brick-cas discard`` calls this, for data Cinder records
        as lost; every other path refuses to drop dirty data.
        """
        timeout = self._timeout
        _check('--remove-core --force' if core.active else
               '--remove-inactive --force',
               priv_casadm.discard_core(validation.cache_id(core.cache_id),
                                        validation.core_id(core.core_id),
                                        not core.active, timeout),
               cache_id=core.cache_id, core_id=core.core_id,
               device=core.device, timeout=timeout)

    def flush(self, cache_id: int, core_id: Optional[int],
              timeout: int) -> None:
        """Flush one core, or the whole cache when *core_id* is None.

        Raises FlushTimedOut or FlushFailed; dirty data stays in the cache.
        """
        cache_id = validation.cache_id(cache_id)
        if core_id is not None:
            core_id = validation.core_id(core_id)
        timeout = validation.timeout(timeout)
        core_label = core_id if core_id is not None else 'all'
        try:
            self._flush_once(cache_id, core_id, timeout)
        except exception.FlushTimedOut:
            raise
        except exception.CasModuleNotLoaded:
            raise
        except exception.CasError as exc:
            raise exception.FlushFailed(cache_id=cache_id, core=core_label,
                                        detail=str(exc))

    @_retry_busy
    def _flush_once(self, cache_id: int, core_id: Optional[int],
                    timeout: int) -> None:
        result = priv_casadm.flush(cache_id, core_id, timeout)
        if result[0] == priv_casadm.TIMED_OUT:
            raise exception.FlushTimedOut(
                cache_id=cache_id,
                core=core_id if core_id is not None else 'all',
                timeout=timeout)
        _check('--flush-cache', result, cache_id=cache_id, core_id=core_id)

    def stats(self, cache_id: int,
              core_id: Optional[int] = None) -> dict[str, str]:
        """Statistics of a cache or one core, keyed by casadm's titles."""
        cache_id = validation.cache_id(cache_id)
        if core_id is not None:
            core_id = validation.core_id(core_id)
        timeout = self._timeout
        return parse_stats(_check('--stats',
                                  priv_casadm.stats(cache_id, core_id,
                                                    timeout),
                                  cache_id=cache_id, core_id=core_id,
                                  timeout=timeout))

    def io_class_stats(self, cache_id: int) -> list[IoClassUsage]:
        """Each IO class's occupancy and dirty blocks: one casadm call."""
        cache_id = validation.cache_id(cache_id)
        timeout = self._timeout
        return parse_io_class_stats(_check(
            '--stats --io-class-id',
            priv_casadm.io_class_stats(cache_id, timeout),
            cache_id=cache_id, timeout=timeout))

    def dirty_blocks(self, core: Core) -> int:
        """Dirty 4 KiB blocks a core holds."""
        return int(float(self.stats(core.cache_id, core.core_id)
                         .get(DIRTY_BLOCKS, '0') or 0))

    def version(self) -> dict[str, str]:
        """``{'CAS Cache Kernel Module': ..., 'CAS CLI Utility': ...}``.

        The host simulator adds a row naming itself
        (:mod:`os_brick_cas.opencas.stand_in`).
        """
        timeout = self._timeout
        out = _check('--version', priv_casadm.version(timeout),
                     timeout=timeout)
        return {row['Name']: row['Version']
                for row in csv.DictReader(io.StringIO(out))}

    def start_cache(self, device: str, cache_id: int, mode: str,
                    line_size_kib: int) -> None:
        """Start a fresh instance; refused over metadata (never forced)."""
        timeout = self._timeout
        _check('--start-cache', priv_casadm.start_cache(
            device, cache_id, mode, line_size_kib, timeout),
            cache_id=cache_id, device=device, timeout=timeout)

    def load_cache(self, device: str) -> None:
        """Load the instance whose metadata *device* holds (``-S -l``)."""
        timeout = self._timeout
        _check('--start-cache --load',
               priv_casadm.load_cache(device, timeout),
               device=device, timeout=timeout)

    def cache_device_metadata(self, device: str) -> dict[str, str]:
        """``{'Is cache': .., 'Clean Shutdown': .., 'Cache dirty': ..}``."""
        timeout = self._timeout
        out = _check('--check-cache-device',
                     priv_casadm.check_cache_device(device, timeout),
                     device=device, timeout=timeout)
        return parse_stats(out)

    def set_params(self, namespace: str, cache_id: int,
                   values: list[tuple[str, object]],
                   core_id: Optional[int] = None) -> None:
        """``--set-param`` of *values* (option, value) in *namespace*."""
        timeout = self._timeout
        _check('--set-param --name %s' % namespace,
               priv_casadm.set_param(namespace, cache_id, core_id,
                                     [list(v) for v in values], timeout),
               cache_id=cache_id, core_id=core_id, timeout=timeout)

    def get_params(self, namespace: str, cache_id: int,
                   core_id: Optional[int] = None) -> dict[str, str]:
        """``--get-param`` of *namespace*: row title -> value."""
        timeout = self._timeout
        out = _check('--get-param --name %s' % namespace,
                     priv_casadm.get_param(namespace, cache_id, core_id,
                                           timeout),
                     cache_id=cache_id, core_id=core_id, timeout=timeout)
        rows = csv.reader(io.StringIO(out))
        header = next(rows, None)
        if header != ['Parameter name', 'Value']:
            raise exception.CasadmCommandFailed(
                operation='--get-param', exit_code=0,
                detail='unexpected output %r' % out[:200])
        return {row[0].strip(): row[1].strip() for row in rows
                if len(row) >= 2}
