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

"""Draining a write-back core: no dirty data, and none can appear.

Open CAS IO classes are per cache instance; a class with allocation 0
never maps cache lines, so in a write-back cache its writes go straight to
the core. Drain = put ``core_id:eq:N&done`` into such a class, then flush
core N (bounded). Undrain = take the class out again.

The table is composed by :mod:`os_brick_cas.io_class_table` (drains and
per-volume shares together) and loaded whole on every change (casadm
replaces it), from what the instance holds now: class 0, a class per
shared core, a drain class per drained core that still exists. The table
persists in cache metadata, so after a reboot the drained state is read
back from it, and classes of cores that no longer exist are dropped at the
next change.

A class names a core *id*, and casadm hands a freed id to the next
core it adds. So a class must never outlive its core: detach drops it, and
because a core can also go without us (removed while inactive after a
reboot, or by an operator), adding a core drops any class its new id
finds (:meth:`DrainManager.forget_inherited`). A just-added core is never
drained, so that rule cannot undrain a core that should stay drained; a
core re-activated after a reboot (try-add, same id and device) keeps its
class.
"""

from typing import Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import deadline as deadline_mod
from os_brick_cas import events
from os_brick_cas import exception
from os_brick_cas import io_class_table
from os_brick_cas import labels
from os_brick_cas import locks
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import releases
from os_brick_cas import opts

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

UNCLASSIFIED = casadm_output.IoClass(0, io_class_table.UNCLASSIFIED,
                                     io_class_table.UNCLASSIFIED_PRIORITY, 1.0)
_IDS = io_class_table.IDS
#: before v24.9 a write of a disabled class invalidates only the written
#: sectors (overlapping dirty lines stay) and per-core flush is not -F -j
DRAIN_SINCE = (24, 9)
_MODULE = 'CAS Cache Kernel Module'
_CLI = 'CAS CLI Utility'
#: instance states in which a per-core flush runs ('Incomplete' refuses it)
_RUNNING = ('Running', 'Flushing')


drain_rule = io_class_table.core_rule
table_lock = io_class_table.table_lock


def drained_cores(table: list[casadm_output.IoClass]) -> set[int]:
    """Core ids a table drains (their class has allocation 0)."""
    return {entry.core_id for entry in io_class_table.entries(table)
            if entry.drained}


def compose(drained: set[int]) -> list[casadm_output.IoClass]:
    """The whole table for an instance whose *drained* cores exist.

    A table without shares; :func:`io_class_table.compose` composes one
    with them.
    """
    return io_class_table.compose(
        [io_class_table.Entry(core_id, None, True)
         for core_id in sorted(drained)]).table


def release_reason(casadm: casadm_mod.Casadm) -> Optional[str]:
    """Why this host's Open CAS release cannot drain, or None."""
    try:
        versions = casadm.version()
    except exception.CasError as exc:
        return ('cannot ask casadm for the Open CAS release (%s); draining '
                'needs v24.9 or newer.' % exc)
    release = versions.get(_MODULE, '')
    line = releases.major_minor(release)
    if line is None:
        release = versions.get(_CLI, '')
        line = releases.major_minor(release)
    if line is None:
        return ('cannot tell the Open CAS release (casadm -V shows %r); '
                'draining needs v24.9 or newer, so it is not attempted.'
                % (versions.get(_MODULE) or versions.get(_CLI) or ''))
    if line < DRAIN_SINCE:
        return ('Open CAS %s is older than v24.9: a disabled IO class there '
                'leaves overlapping dirty lines and "casadm -F -j" (flush '
                'one core) does not exist, so a write-back core cannot be '
                'drained; upgrade Open CAS to v24.9 or newer.' % release)
    return None


def state_reason(cache: casadm_output.CacheInstance) -> Optional[str]:
    """Why os-brick-cas does not drain a core of *cache* now, or None.

    Only a Running instance: an Incomplete one has inactive cores (casadm
    refuses its whole-cache flush), and a drain there is not attempted.
    """
    if cache.status.startswith(_RUNNING):
        return None
    return ('cache instance %d is %s; os-brick-cas drains only on a '
            'Running instance. Attach (or detach) its inactive volumes '
            'first (see "os-brick-cas status").'
            % (cache.cache_id, cache.status))


def budget_reason(cache: casadm_output.CacheInstance,
                  table: list[casadm_output.IoClass]) -> Optional[str]:
    """Why no further core of *cache* can get a drain class, or None.

    Classes of cores that are gone do not count (the next change drops
    them); when every core is drained already, a full table is fine.
    """
    existing = {core.core_id for core in cache.cores}
    live = drained_cores(table) & existing
    if len(live) < len(_IDS) or existing <= live:
        return None
    return ('cache instance %d already drains %d cores, all its IO classes '
            '(ids 1-32); undrain a volume ("os-brick-cas undrain") first.'
            % (cache.cache_id, len(live)))


def unsupported_reason(casadm: casadm_mod.Casadm,
                       cache: casadm_output.CacheInstance) -> Optional[str]:
    """None if this host can drain a core of *cache*, else why not.

    The reason is one sentence an operator acts on: the Open CAS release
    (kernel module, else casadm; v24.9 or newer), the instance's state
    (Running) and its IO-class budget.
    """
    reason = release_reason(casadm) or state_reason(cache)
    if reason:
        return reason
    try:
        table = casadm.list_io_classes(cache.cache_id)
    except exception.CasError as exc:
        return ('cannot read the IO-class table of cache instance %d (%s).'
                % (cache.cache_id, exc))
    return budget_reason(cache, table)


class DrainManager(object):
    """Drain and undrain cores of an instance.

    Table changes hold :func:`table_lock`; drain also holds the instance
    lock (taken first) around its flush, as every flush does.
    """

    def __init__(self, casadm: casadm_mod.Casadm):
        self.casadm = casadm

    def _apply_locked(self, cache: casadm_output.CacheInstance, core_id: int,
                      drained: bool) -> bool:
        # the cores and the table as they are now, under the lock: a
        # listing taken before waiting for it would drop the class of a
        # drain that finished meanwhile, or keep a removed core's
        current = self.casadm.list_io_classes(cache.cache_id)
        existing = {core.core_id for core in self._fresh(cache.cache_id)
                    .cores}
        before = io_class_table.entries(current)
        share = next((entry.share for entry in before
                      if entry.core_id == core_id), None)
        wanted = io_class_table.with_entry(before, core_id, share, drained,
                                           existing)
        if sum(entry.drained for entry in wanted) > len(_IDS):
            raise exception.IoClassBudgetSpent(core=core_id,
                                               cache_id=cache.cache_id)
        composed = io_class_table.compose(wanted)
        if composed.table == current:
            return False
        self.casadm.load_io_classes(cache.cache_id, composed.table)
        io_class_table.warn_unshared(cache.cache_id, composed)
        return True

    def drain(self, cache: casadm_output.CacheInstance,
              core: casadm_output.Core, timeout: int) -> None:
        """:meth:`drain_fresh` of *core* within *timeout* seconds."""
        self.drain_fresh(cache.cache_id, core.core_id,
                         deadline_mod.Deadline(timeout))

    def _fresh(self, cache_id: int) -> casadm_output.CacheInstance:
        """Instance *cache_id* as casadm lists it now."""
        for cache in self.casadm.list_caches():
            if cache.cache_id == cache_id:
                return cache
        raise exception.CacheNotFound(cache_id=cache_id)

    def drain_fresh(self, cache_id: int, core_id: int, limit) -> None:
        """Pin and flush core *core_id*, within *limit* (a Deadline).

        Everything is read after taking the instance lock, and the lock
        wait counts against *limit*.
        """
        reason = release_reason(self.casadm)
        if reason:
            raise exception.DrainUnsupported(reason=reason)
        limit.whole_seconds('the drain')
        with locks.cache_lock(cache_id, limit.left()), events.timed('drain'):
            cache = self._fresh(cache_id)
            reason = state_reason(cache)
            if reason:
                raise exception.DrainUnsupported(reason=reason)
            with table_lock(cache_id, limit.left()):
                changed = self._apply_locked(cache, core_id, True)
            if changed:
                LOG.info('Drained %s: its writes now go straight to Ceph',
                         labels.core(cache_id, core_id))
            self.casadm.flush(cache_id, core_id,
                              limit.whole_seconds('the flush'))

    def undrain_fresh(self, cache_id: int, core_id: int, limit) -> None:
        """Drop core *core_id*'s drain class (table lock only)."""
        with table_lock(cache_id, limit.left()):
            if self._apply_locked(self._fresh(cache_id), core_id, False):
                LOG.info('Undrained %s', labels.core(cache_id, core_id))

    def undrain(self, cache: casadm_output.CacheInstance,
                core: Optional[casadm_output.Core], core_id: int) -> None:
        """:meth:`undrain_fresh` of core *core_id* (idempotent).

        Only the table lock: an undrain (a migration's rollback) does not
        wait for a flush running on the instance.
        """
        self.undrain_fresh(cache.cache_id, core_id, deadline_mod.Deadline(
            CONF[opts.GROUP].lock_timeout))

    def drop_class_of_removed_core(self, cache_id: int, core_id: int
                                   ) -> None:
        """After core *core_id* was removed: drop its class (drain, share).

        Otherwise the next core given that id would inherit it.
        """
        self._drop(cache_id, core_id)

    def _drop(self, cache_id: int, core_id: int) -> bool:
        """Drop core *core_id*'s class if any; True if there was one.

        The rest of the table is composed again for the cores listed now
        (:func:`io_class_table.recomposed`): after a reboot it is whatever
        the cache metadata held, and ``recover`` of an orphaned core, or
        any detach, is the first change it sees.
        """
        with table_lock(cache_id):
            current = self.casadm.list_io_classes(cache_id)
            if io_class_table.is_default(current):
                return False
            before = io_class_table.entries(current)
            had = io_class_table.without_core(before, core_id) != before
            existing = {core.core_id for cache in self.casadm.list_caches()
                        if cache.cache_id == cache_id
                        for core in cache.cores} - {core_id}
            composed = io_class_table.recomposed(current, existing)
            if composed is not None:
                self.casadm.load_io_classes(cache_id, composed.table)
                io_class_table.warn_unshared(cache_id, composed)
            return had

    def forget_inherited(self, cache_id: int, core_id: int) -> None:
        """After core *core_id* was just added: drop a class it inherited.

        A new core is never drained; a class naming its id belonged to an
        earlier core removed without :meth:`drop_class_of_removed_core`
        (see the module docstring). Takes only :func:`table_lock`.
        """
        if self._drop(cache_id, core_id):
            LOG.warning('Dropped the drain class an earlier core left for '
                        '%s, just added with its id, so the new volume '
                        'caches its writes.', labels.core(cache_id, core_id))

    def is_drained(self, cache_id: int, core_id: int) -> bool:
        return core_id in drained_cores(
            self.casadm.list_io_classes(cache_id))
