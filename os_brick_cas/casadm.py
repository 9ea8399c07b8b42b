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

"""How to talk to casadm: bounded calls, retries and error mapping.

No policy lives here. Root work is done by the entry points in
:mod:`os_brick_cas.privileged.casadm`; this module validates arguments
before anything is sent to the daemon, hands what casadm printed to the
parsers of :mod:`os_brick_cas.opencas.casadm_output` (its typed records),
and turns non-zero exits into specific exceptions.
"""

import csv
import io
import re
from typing import Callable, Optional

from oslo_config import cfg
from oslo_log import log as logging
import tenacity

from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from os_brick_cas.privileged import casadm as priv_casadm
from os_brick_cas import validation

LOG = logging.getLogger(__name__)

_ADDED = re.compile(r'Successfully added core (\d+) to cache instance (\d+)')


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

    def list_caches(self) -> list[casadm_output.CacheInstance]:
        """All cache instances and their cores (by-id paths)."""
        timeout = self._timeout
        return casadm_output.parse_list(_check(
            '--list-caches', priv_casadm.list_caches(timeout),
            timeout=timeout))

    def core_pool(self) -> list[str]:
        """Devices parked in the core pool (by-id paths)."""
        timeout = self._timeout
        return casadm_output.parse_core_pool(_check(
            '--list-caches', priv_casadm.list_caches(timeout),
            timeout=timeout))

    def remove_detached(self, device: str) -> None:
        """Release *device* from the core pool (it holds no cache data)."""
        device = validation.by_id_path(device)
        timeout = self._timeout
        _check('--remove-detached',
               priv_casadm.remove_detached(device, timeout),
               device=device, timeout=timeout)

    @staticmethod
    def find_core(caches: list[casadm_output.CacheInstance],
                  device: str) -> Optional[casadm_output.Core]:
        """The core added with by-id path *device*, in any instance."""
        for cache in caches:
            core = cache.find_core(device)
            if core is not None:
                return core
        return None

    @_retry_busy
    def add_core(self, cache_id: int, device: str,
                 core_id: Optional[int] = None) -> casadm_output.Core:
        """Add *device* to *cache_id* as *core_id* (None: casadm picks)."""
        cache_id = validation.cache_id(cache_id)
        device = validation.by_id_path(device)
        if core_id is not None:
            core_id = validation.core_id(core_id)
        timeout = self._timeout
        out = _check('--add-core',
                     priv_casadm.add_core(cache_id, device, timeout, core_id),
                     cache_id=cache_id, device=device, timeout=timeout)
        match = _ADDED.search(out)
        if not match:
            raise exception.CasadmCommandFailed(
                operation='--add-core', exit_code=0,
                detail='no core id in %r' % out)
        core_id = int(match.group(1))
        return casadm_output.Core(
            cache_id=cache_id, core_id=core_id, device=device,
            status='Active',
            exported=casadm_output.exported_path(cache_id, core_id))

    @_retry_busy
    def try_add_core(self, cache_id: int, core_id: int, device: str
                     ) -> casadm_output.Core:
        """Re-activate an inactive core on its (returned) device.

        casadm exits 0 also when *cache_id* is not running: the device is
        then parked in the core pool (see
        :func:`os_brick_cas.opencas.casadm_output.parse_core_pool`).
        """
        cache_id = validation.cache_id(cache_id)
        core_id = validation.core_id(core_id)
        device = validation.by_id_path(device)
        timeout = self._timeout
        _check('--try-add', priv_casadm.try_add_core(cache_id, core_id,
                                                     device, timeout),
               cache_id=cache_id, core_id=core_id, device=device,
               timeout=timeout)
        return casadm_output.Core(
            cache_id=cache_id, core_id=core_id, device=device,
            status='Active',
            exported=casadm_output.exported_path(cache_id, core_id))

    @_retry_opened
    @_retry_busy
    def remove_core(self, core: casadm_output.Core) -> None:
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
    def remove_inactive_core(self, core: casadm_output.Core) -> None:
        """Remove an inactive core; casadm refuses while it is dirty."""
        timeout = self._timeout
        _check('--remove-inactive',
               priv_casadm.remove_inactive_core(
                   validation.cache_id(core.cache_id),
                   validation.core_id(core.core_id), timeout),
               cache_id=core.cache_id, core_id=core.core_id,
               device=core.device, timeout=timeout)

    def list_io_classes(self, cache_id: int) -> list[casadm_output.IoClass]:
        """The IO-class table of *cache_id*."""
        cache_id = validation.cache_id(cache_id)
        timeout = self._timeout
        out = _check('--io-class --list',
                     priv_casadm.list_io_classes(cache_id, timeout),
                     cache_id=cache_id, timeout=timeout)
        return casadm_output.parse_io_classes(out)

    def load_io_classes(self, cache_id: int,
                        table: list[casadm_output.IoClass]) -> None:
        """Replace the whole IO-class table of *cache_id* with *table*."""
        cache_id = validation.cache_id(cache_id)
        timeout = self._timeout
        _check('--io-class --load-config',
               priv_casadm.load_io_classes(
                   cache_id, [(c.class_id, c.name, c.priority, c.allocation)
                              for c in table], timeout),
               cache_id=cache_id, timeout=timeout)

    def discard_core(self, core: casadm_output.Core) -> None:
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

    def stop_cache(self, cache_id: int, timeout: int) -> None:
        """Stop an instance, flushing it first (never dropping dirty data).

        Raises FlushTimedOut when the stop's flush did not finish within
        *timeout* seconds; the instance then keeps running with its data.
        """
        cache_id = validation.cache_id(cache_id)
        timeout = validation.timeout(timeout)
        result = priv_casadm.stop_cache(cache_id, timeout)
        if result[0] == priv_casadm.TIMED_OUT:
            raise exception.FlushTimedOut(cache_id=cache_id, core='all',
                                          timeout=timeout)
        _check('--stop-cache', result, cache_id=cache_id, timeout=timeout)

    def stats(self, cache_id: int,
              core_id: Optional[int] = None) -> dict[str, str]:
        """Statistics of a cache or one core, keyed by casadm's titles."""
        cache_id = validation.cache_id(cache_id)
        if core_id is not None:
            core_id = validation.core_id(core_id)
        timeout = self._timeout
        return casadm_output.parse_stats(_check(
            '--stats', priv_casadm.stats(cache_id, core_id, timeout),
            cache_id=cache_id, core_id=core_id, timeout=timeout))

    def io_class_stats(self, cache_id: int
                       ) -> list[casadm_output.IoClassUsage]:
        """Each IO class's occupancy and dirty blocks: one casadm call."""
        cache_id = validation.cache_id(cache_id)
        timeout = self._timeout
        return casadm_output.parse_io_class_stats(_check(
            '--stats --io-class-id',
            priv_casadm.io_class_stats(cache_id, timeout),
            cache_id=cache_id, timeout=timeout))

    def dirty_blocks(self, core: casadm_output.Core) -> int:
        """Dirty 4 KiB blocks a core holds."""
        return int(float(self.stats(core.cache_id, core.core_id)
                         .get(casadm_output.DIRTY_BLOCKS, '0') or 0))

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
        return casadm_output.parse_stats(out)

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
