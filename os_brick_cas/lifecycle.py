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

"""The life cycle of one cached volume on this host, in one place.

The rule that holds at every instant, across crashes: **what Cinder
believes about a volume is never stronger than what this host
guarantees.** "Drained for attachment A" in Cinder means A's core holds no
dirty data and cannot get any; "owned by host H, epoch E" means only H
may write the volume's cached data to Ceph.

How it holds:

* One per-volume inter-process lock (:func:`locks.volume_lock`) around
  every transition, taken by nova-compute and the CLI alike; the
  instance lock (IO-class changes, flushes) is taken inside it, and the
  listing an IO-class table is composed from is read after taking it.
* Ordering: Cinder is told a weaker guarantee *before* the host weakens
  it (the marker goes to "caching" by compare-and-swap before the drain
  class goes), and a stronger one only *after* the host holds it and a
  fresh listing shows it (class loaded, core active, 0 dirty). If Cinder
  cannot be told, a weakening transition does not happen.
* A journal (:mod:`os_brick_cas.lifecycle_journal`): each in-flight
  transition is a typed, versioned record per volume under
  ``state_path``/lifecycle, written atomically; a file there that is not
  a valid record is quarantined and reported, never trusted; a drain nova made
  for an operation still running (live migration, snapshot, swap) stays
  recorded until that operation ends. :func:`resolve` finishes or rolls
  back what a crashed process left, before the volume is served again;
  an unfinished drain and an unfinished undrain both resolve to
  "caching", by the same weaken-Cinder-first path.

The states and the allowed transitions are :data:`TRANSITIONS`; the
admin guide's life-cycle page draws the same table.
"""

import dataclasses
import os
from typing import Callable, Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import deadline as deadline_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import identity
from os_brick_cas import lifecycle_journal as journal
from os_brick_cas import locks
from os_brick_cas import opts
from os_brick_cas import ownership
from os_brick_cas import rbd_names

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

# -- states ------------------------------------------------------------
ABSENT = 'absent'            #: no core of the volume on this host
CACHING = 'caching'          #: active core, writes may get dirty
DRAINING = 'draining'        #: drain in flight (journaled)
DRAINED = 'drained'          #: drain class loaded, flushed: 0 dirty
UNDRAINING = 'undraining'    #: undrain in flight (journaled)
INACTIVE = 'inactive'        #: core listed, not active (after a reboot)
STALE = 'stale'              #: cached data of an owner declared lost
ORPHANED = 'orphaned'        #: core whose attachment is gone

STATES = (ABSENT, CACHING, DRAINING, DRAINED, UNDRAINING, INACTIVE, STALE,
          ORPHANED)

#: (state, event) -> state after it. Every caller's transition is one of
#: these; anything else is refused (TransitionRefused).
TRANSITIONS: dict[tuple[str, str], str] = {
    (ABSENT, 'attach'): CACHING,
    (CACHING, 'attach'): CACHING,            # idempotent re-attach
    (DRAINED, 'attach'): DRAINED,            # re-attach keeps the drain
    (ABSENT, 'detach'): ABSENT,              # idempotent: nothing cached
    (CACHING, 'detach'): ABSENT,             # flush, remove, unmap
    (DRAINED, 'detach'): ABSENT,             # swap's old volume, migration
    (INACTIVE, 'reactivate'): CACHING,       # attach after a reboot
    (INACTIVE, 'detach'): ABSENT,            # map, re-activate, flush
    (CACHING, 'drain'): DRAINING,            # pin, flush, verify
    (DRAINING, 'drain-verified'): DRAINED,   # then Cinder is told
    (DRAINING, 'drain-failed'): DRAINED,     # pinned, Cinder not told
    (DRAINED, 'drain'): DRAINED,             # idempotent
    (DRAINED, 'reclaim'): DRAINED,           # marker names this host again
    (CACHING, 'flush'): CACHING,             # flush in place
    (DRAINED, 'flush'): DRAINED,
    (DRAINED, 'undrain'): UNDRAINING,        # Cinder told first
    (UNDRAINING, 'undrain-done'): CACHING,
    (CACHING, 'undrain'): CACHING,           # idempotent
    (DRAINING, 'resolve'): UNDRAINING,       # crash mid-drain: roll back
    (UNDRAINING, 'resolve'): UNDRAINING,     # crash mid-undrain: finish
    (ORPHANED, 'recover'): ABSENT,           # flush to Ceph, remove
    (STALE, 'discard'): ABSENT,              # drop, owner declared lost
}

#: nova operations a drain can be held for (the CLI's is OPERATOR)
OPERATOR = 'operator'
LIVE_MIGRATION = 'live-migration'
SNAPSHOT = 'snapshot'
SWAP = 'swap'


def next_state(state: str, event: str, volume: str) -> str:
    """The state *event* leads to from *state*, or TransitionRefused."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        hint = ('see "Volume life cycle" in the admin guide' if state not in
                (DRAINING, UNDRAINING) else
                'a stopped process left it; "os-brick-cas undrain --volume '
                '%s" or a restart of nova-compute resolves it first' % volume)
        raise exception.TransitionRefused(
            action=event, volume=volume,
            reason='the volume is %s on this host, and %s is not a '
                   'transition from there (%s)' % (state, event, hint))


def require(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec,
            event: str, label: str, classified: Optional[str] = None,
            caches: Optional[list[casadm_mod.CacheInstance]] = None
            ) -> None:
    """Refuse *event* (TransitionRefused) unless *spec*'s state allows it.

    For callers that change the volume themselves (the connector's
    attach, detach and flush, discard): call it holding
    :func:`locks.volume_lock`. An in-flight journal record wins; else
    *classified* (a state the caller established, e.g. STALE) or what the
    host shows (*caches*: the listing the caller just read under the
    lock). An attach of an inactive core is its re-activation. The
    IO-class table is read only when the verdict depends on it.
    """
    record = read_record(spec)
    if record and record.state in (DRAINING, UNDRAINING):
        now = record.state
    elif classified is not None:
        now = classified
    else:
        found = locate(casadm, spec, caches)
        if (found is not None and found.core.active and
                (CACHING, event) in TRANSITIONS and
                (DRAINED, event) in TRANSITIONS):
            return      # allowed drained or not: no table needed
        now = _state_of(casadm, found)
    if event == 'attach' and now == INACTIVE:
        event = 'reactivate'
    next_state(now, event, label)


# -- time bounds ---------------------------------------------------------
#: one time bound for a whole operation (see os_brick_cas.deadline)
Deadline = deadline_mod.Deadline


def deadline(seconds: Optional[float] = None) -> Deadline:
    """A Deadline of *seconds*; default: one volume's flush and calls."""
    group = CONF[opts.GROUP]
    return Deadline(seconds if seconds is not None
                    else group.flush_timeout + group.casadm_timeout)


# -- Cinder's view -------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Cinder:
    """How this caller reaches the volume's fence marker.

    *client* None: Cinder cannot be asked now (*problem* says why). With
    *in_use* False the deployment keeps no markers (nova's
    ``use_fence_marker = false``): there is no view to keep weaker.
    """

    host: str
    client: Optional[fence.FenceClient] = None
    in_use: bool = True
    problem: Optional[str] = None


def _owner(cinder: Cinder, volume_id: Optional[str], action: str
           ) -> Optional[fence.Owner]:
    """The marker now; TransitionRefused if it cannot be read."""
    if cinder.client is None or volume_id is None:
        raise exception.TransitionRefused(
            action=action, volume=volume_id,
            reason='Cinder cannot be told (%s), and it may record the volume '
                   'as drained; the volume stays drained (safe: its writes '
                   'go straight to Ceph). Give this host Cinder admin '
                   'credentials (OS_CLOUD, or nova.conf [cinder]) and retry.'
                   % (cinder.problem or 'no credentials'))
    try:
        return cinder.client.owner(volume_id)
    except Exception as exc:
        raise exception.TransitionRefused(
            action=action, volume=volume_id,
            reason='Cinder cannot be asked (%s); the volume stays drained '
                   '(safe). Retry when Cinder answers.' % exc)


# -- the journal ---------------------------------------------------------
#: the journal (os_brick_cas.lifecycle_journal): typed, versioned records
Record = journal.Record
journal_dir = journal.journal_dir
read_record = journal.read
remove_record = journal.remove
records = journal.records

#: test hook: called with the step name at each journaled step
step_hook: Optional[Callable[[str], None]] = None


def _step(name: str) -> None:
    if step_hook is not None:
        step_hook(name)


# -- the host ------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Located:
    """A volume's core on this host as a fresh listing shows it."""

    cache: casadm_mod.CacheInstance
    core: casadm_mod.Core

    @property
    def epoch(self) -> Optional[str]:
        record = ownership.read(self.core.device)
        return record.epoch if record else None


def locate(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec,
           caches: Optional[list[casadm_mod.CacheInstance]] = None
           ) -> Optional[Located]:
    """The core whose identifying link names *spec* (casadm now).

    *caches*: a listing the caller just read, instead of casadm's.
    """
    for cache in (casadm.list_caches() if caches is None else caches):
        for core in cache.cores:
            named = rbd_names.parse_link_name(os.path.basename(core.device))
            if named is not None and named.same_image(spec):
                return Located(cache, core)
    return None


def host_state(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec
               ) -> str:
    """The state the host itself shows (the journal aside)."""
    return _state_of(casadm, locate(casadm, spec))


def _state_of(casadm: casadm_mod.Casadm, found: Optional[Located]) -> str:
    """The state of the core *found* (None: no core) as the host shows it."""
    if found is None:
        return ABSENT
    if not found.core.active:
        return INACTIVE
    drained = drain_mod.drained_cores(
        casadm.list_io_classes(found.cache.cache_id))
    return DRAINED if found.core.core_id in drained else CACHING


def state(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec) -> str:
    """The volume's state: an in-flight journal record wins."""
    record = read_record(spec)
    if record and record.state in (DRAINING, UNDRAINING):
        return record.state
    return host_state(casadm, spec)


def not_drained_reason(casadm: casadm_mod.Casadm,
                       spec: rbd_names.ImageSpec,
                       caches: Optional[list[casadm_mod.CacheInstance]]
                       = None,
                       tables: Optional[dict[int, list[casadm_mod.IoClass]]]
                       = None) -> Optional[str]:
    """Why a fresh listing does not show the volume drained, or None.

    Drained = core active, its drain class loaded, 0 dirty blocks.
    *caches* and *tables* (IO-class tables by instance): a listing the
    caller just read, instead of asking casadm again.
    """
    found = locate(casadm, spec, caches)
    if found is None:
        return 'it has no core on this host'
    if not found.core.active:
        return 'its core %d of instance %d is inactive' % (
            found.core.core_id, found.cache.cache_id)
    table = (tables or {}).get(found.cache.cache_id)
    if table is None:
        table = casadm.list_io_classes(found.cache.cache_id)
    if found.core.core_id not in drain_mod.drained_cores(table):
        return ('the IO-class table of instance %d does not drain core %d '
                '(loaded by someone else?)' % (found.cache.cache_id,
                                               found.core.core_id))
    dirty = casadm.dirty_blocks(found.core)
    if dirty:
        return 'core %d of instance %d still holds %d dirty blocks' % (
            found.core.core_id, found.cache.cache_id, dirty)
    return None


# -- transitions -----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Volume:
    """What a transition needs to name a volume."""

    spec: rbd_names.ImageSpec
    volume_id: Optional[str]

    @property
    def label(self) -> str:
        return self.volume_id or '/'.join(
            p for p in (self.spec.pool, self.spec.namespace,
                        self.spec.image) if p)


@dataclasses.dataclass(frozen=True)
class DrainResult:
    """What a drain did: blocks flushed, and whether Cinder was told."""

    dirty_before: int
    recorded: bool
    why_not_recorded: Optional[str] = None


class Lifecycle(object):
    """Transitions of cached volumes on this host (see module doc)."""

    def __init__(self, casadm: Optional[casadm_mod.Casadm] = None):
        self.casadm = casadm or casadm_mod.Casadm()
        self.drains = drain_mod.DrainManager(self.casadm)

    # drain --------------------------------------------------------------
    def drain(self, volume: Volume, cinder: Cinder, limit: Deadline,
              holder: str = OPERATOR, instance: Optional[str] = None
              ) -> DrainResult:
        """Pin, flush, verify from a fresh listing, then tell Cinder.

        A drain whose flush fails leaves the core pinned (no new dirty
        data) with its remaining dirty data in the cache, and Cinder
        untold: the host is stronger than Cinder's view, which is safe.
        *holder* names the nova operation the drain is kept for: recorded
        in the journal until that operation undrains it (also after a
        failure); an OPERATOR drain is the host's own state.
        """
        with locks.volume_lock(volume.spec, limit.left()):
            self._resolve_locked(volume.spec, cinder, limit)
            now = host_state(self.casadm, volume.spec)
            next_state(now, 'drain', volume.label)
            found = locate(self.casadm, volume.spec)
            identity.verify_link(found.core.device, 'drain volume %s'
                                 % volume.label, volume.spec)
            epoch = found.epoch
            self.refuse_other_owner(volume, cinder, found, 'drain')
            previous = (read_record(volume.spec) or
                        journal.Record(volume.spec, DRAINING))
            if now == DRAINED and holder != OPERATOR:
                # drained before: by an operator (no record: it stays
                # theirs), or by nova for this same operation (a retried
                # pre-check). An operator's drain always becomes theirs.
                holder = previous.holder or OPERATOR
            record = previous.replace(
                state=DRAINING, phase='host', origin=now,
                volume_id=volume.volume_id, epoch=epoch, host=cinder.host,
                holder=holder, instance=instance or previous.instance)
            journal.write(record)
            _step('drain:journaled')
            try:
                dirty = self.casadm.dirty_blocks(found.core)
                self.drains.drain_fresh(found.cache.cache_id,
                                        found.core.core_id, limit)
                _step('drain:flushed')
                reason = not_drained_reason(self.casadm, volume.spec)
                if reason:
                    raise exception.CasError(
                        message='volume %s is not drained after its flush: '
                                '%s' % (volume.label, reason))
            except Exception:
                self._settle(volume.spec, record, DRAINED)
                raise
            journal.write(record.replace(phase='cinder'))
            _step('drain:telling')
            result = self._record_drained(volume, cinder, epoch, dirty)
            _step('drain:told')
            self._settle(volume.spec, record, DRAINED)
            return result

    @staticmethod
    def _settle(spec: rbd_names.ImageSpec, record: journal.Record,
                to: str) -> None:
        """End a transition: keep nova's hold, drop an operator's."""
        if record.holder in (None, OPERATOR):
            remove_record(spec)
        else:
            journal.write(record.replace(state=to, phase=None))

    def refuse_other_owner(self, volume: Volume, cinder: Cinder,
                           found: Located, action: str) -> None:
        """Only the owner writes the volume's cached data to Ceph.

        NotDataOwner when Cinder names another owner (another host, or an
        attachment of this host declared lost) and the core is dirty.
        Without an answer from Cinder a drain or flush goes on: the core
        is active, so Open CAS's cleaner writes its data to Ceph anyway.
        """
        if cinder.client is None or volume.volume_id is None:
            return
        try:
            owner = cinder.client.owner(volume.volume_id)
        except Exception as exc:
            LOG.warning('Cannot ask Cinder who owns volume %(vol)s (%(err)s)'
                        '; %(action)s of its active core goes on',
                        {'vol': volume.label, 'err': exc, 'action': action})
            return
        epoch = found.epoch
        if owner is None or (owner.host == cinder.host and
                             owner.epoch in (None, epoch)):
            return
        dirty = self.casadm.dirty_blocks(found.core)
        if dirty:
            raise ownership.not_owner(
                action, volume.label, found.core.cache_id,
                found.core.core_id, dirty, ownership.read(found.core.device),
                owner.epoch if owner.host == cinder.host else None)

    def _record_drained(self, volume: Volume, cinder: Cinder,
                        epoch: Optional[str], dirty: int) -> DrainResult:
        """Strengthen Cinder's view, the host verified: CAS to drained."""
        if not cinder.in_use:
            return DrainResult(dirty, False, 'no fence marker kept')
        if cinder.client is None or volume.volume_id is None:
            return DrainResult(dirty, False, cinder.problem or
                               'no Cinder credentials')
        try:
            owner = cinder.client.owner(volume.volume_id)
            if not fence.may_record_drain(owner, cinder.host, epoch):
                return DrainResult(
                    dirty, False, 'its fence marker does not name this host '
                                  '(%s) and the attachment cached here'
                    % cinder.host)
            if owner == fence.Owner(cinder.host, epoch, True):
                return DrainResult(dirty, True)
            cinder.client.set(volume.volume_id, cinder.host, epoch,
                              drained=True, expect=owner)
        except Exception as exc:
            # the host is drained whatever Cinder says: safe
            LOG.warning('Volume %(vol)s is drained, but Cinder was not told '
                        '(%(err)s)', {'vol': volume.label, 'err': exc})
            return DrainResult(dirty, False, str(exc))
        return DrainResult(dirty, True)

    # undrain ------------------------------------------------------------
    def undrain(self, volume: Volume, cinder: Cinder, limit: Deadline,
                retake: bool = False, holder: Optional[str] = None) -> bool:
        """Tell Cinder "caching" (CAS), then let the core cache writes.

        *retake*: the caller knows the host the marker names never ran
        the guest (a live migration failed before its switchover), so it
        is named owner again. With *holder*, only a drain nova holds for
        that operation is undone; an operator's drain stays. Returns
        False when nothing was undrained. Raises TransitionRefused when
        Cinder cannot be told or the marker names another owner: the
        volume then stays drained (safe).
        """
        with locks.volume_lock(volume.spec, limit.left()):
            self._resolve_locked(volume.spec, cinder, limit)
            if holder is not None:
                record = read_record(volume.spec)
                if not record or record.holder != holder:
                    return False
            return self._undrain_locked(volume, cinder, limit, retake)

    def _undrain_locked(self, volume: Volume, cinder: Cinder,
                        limit: Deadline, retake: bool,
                        rolling_back: bool = False,
                        cinder_told: bool = True) -> bool:
        """Weaken Cinder (unless it was never told), then unpin.

        *cinder_told* False only for a drain that crashed before it
        asked Cinder to record it: Cinder cannot say "drained" for it.
        """
        found = locate(self.casadm, volume.spec)
        if found is None:
            remove_record(volume.spec)
            return False
        if not found.core.active:
            raise exception.TransitionRefused(
                action='undrain', volume=volume.label,
                reason='its core %d of instance %d is inactive; attach the '
                       'volume (re-activation) first'
                % (found.core.core_id, found.cache.cache_id))
        drained = found.core.core_id in drain_mod.drained_cores(
            self.casadm.list_io_classes(found.cache.cache_id))
        if not drained and not rolling_back:
            remove_record(volume.spec)
            return False
        previous = read_record(volume.spec)
        journal.write((previous or journal.Record(volume.spec, UNDRAINING)
                       ).replace(state=UNDRAINING,
                                 volume_id=volume.volume_id,
                                 host=cinder.host,
                                 phase='cinder' if cinder_told else 'host'))
        _step('undrain:journaled')
        if cinder_told:
            try:
                self._weaken_cinder(volume, cinder, found.epoch, retake)
            except exception.CasError:
                # refused before the host changed: as it was (a roll-back
                # stays journaled, to be retried)
                if rolling_back:
                    pass
                elif previous is None:
                    remove_record(volume.spec)
                else:
                    journal.write(previous)
                raise
        _step('undrain:told')
        self.drains.undrain_fresh(found.cache.cache_id, found.core.core_id,
                                  limit)
        _step('undrain:unpinned')
        remove_record(volume.spec)
        return drained

    def _weaken_cinder(self, volume: Volume, cinder: Cinder,
                       epoch: Optional[str], retake: bool) -> None:
        """Marker to "this host caches it" (CAS), before the unpin."""
        if not cinder.in_use:
            return
        owner = _owner(cinder, volume.volume_id, 'undrain')
        wanted = fence.Owner(cinder.host, epoch, False)
        if owner == wanted or (owner is not None and
                               owner.host == cinder.host and
                               owner.epoch is None and not owner.drained):
            return
        if owner is not None and owner.host != cinder.host and not retake:
            raise exception.TransitionRefused(
                action='undrain', volume=volume.label,
                reason='its fence marker names host %s, not this host (%s); '
                       'the volume stays drained (nothing is lost). Detach '
                       'it here if it runs elsewhere now.'
                       % (owner.host, cinder.host))
        try:
            cinder.client.set(volume.volume_id, cinder.host, epoch,
                              expect=owner)
        except exception.FenceConflict as exc:
            raise exception.TransitionRefused(
                action='undrain', volume=volume.label,
                reason='its fence marker changed meanwhile (now %s); the '
                       'volume stays drained. Retry.' % (exc.current,))
        except Exception as exc:
            raise exception.TransitionRefused(
                action='undrain', volume=volume.label,
                reason='Cinder could not be told (%s); the volume stays '
                       'drained (safe). Retry when Cinder answers.' % exc)

    # crash recovery -------------------------------------------------------
    def resolve(self, spec: rbd_names.ImageSpec, cinder: Cinder,
                limit: Deadline) -> Optional[str]:
        """Finish or roll back *spec*'s unfinished transition.

        Returns None when nothing is left in flight, else why not.
        """
        with locks.volume_lock(spec, limit.left()):
            return self._resolve_locked(spec, cinder, limit, quiet=True)

    def _resolve_locked(self, spec: rbd_names.ImageSpec, cinder: Cinder,
                        limit: Deadline, quiet: bool = False
                        ) -> Optional[str]:
        record = read_record(spec)
        if not record or record.state not in (DRAINING, UNDRAINING):
            return None
        volume = Volume(spec, record.volume_id)
        LOG.warning('Volume %(vol)s: resolving a %(state)s left by a '
                    'process that stopped; it goes back to caching',
                    {'vol': volume.label, 'state': record.state})
        if record.state == DRAINING and record.origin == DRAINED:
            # a repeated drain: back to where it started, still drained
            # (the host is at least as strong as before)
            self._settle(spec, record, DRAINED)
            return None
        # a drain from caching that never asked Cinder rolls back without
        # it; anything else weakens Cinder first
        told = not (record.state == DRAINING and record.phase == 'host')
        try:
            self._undrain_locked(volume, cinder, limit, retake=False,
                                 rolling_back=True, cinder_told=told)
        except exception.CasError as exc:
            if not quiet:
                raise
            return str(exc)
        return None

    def resolve_all(self, cinder: Cinder, limit: Deadline
                    ) -> dict[str, str]:
        """Resolve every unfinished transition; {volume: why not}."""
        unresolved = {}
        for record in list(records()):
            try:
                why = self.resolve(record.spec, cinder, limit)
            except exception.CasError as exc:
                why = str(exc)
            if why:
                unresolved[record.volume_id or record.spec.image] = why
        return unresolved

    # the marker only -------------------------------------------------------
    def reclaim(self, volume: Volume, cinder: Cinder, limit: Deadline,
                epoch: Optional[str]) -> bool:
        """Name this host (drained, attachment *epoch*) in the marker again.

        For a volume that stays drained here after a failed live migration
        whose destination had taken the marker over: a stronger view, so
        only after a fresh listing shows the volume drained, under the
        volume lock, by compare-and-swap. Returns False if the host does
        not hold the drain (the marker is left alone; TransitionRefused
        when the table does not allow it).
        """
        if not cinder.in_use:
            return False
        with locks.volume_lock(volume.spec, limit.left()):
            self._resolve_locked(volume.spec, cinder, limit)
            next_state(state(self.casadm, volume.spec), 'reclaim',
                       volume.label)
            reason = not_drained_reason(self.casadm, volume.spec)
            if reason:
                LOG.error('Volume %s is not drained here (%s): the fence '
                          'marker is not taken back as drained',
                          volume.label, reason)
                return False
            owner = _owner(cinder, volume.volume_id, 'reclaim')
            cinder.client.set(volume.volume_id, cinder.host, epoch,
                              drained=True, expect=owner)
            return True

    def keep_drained(self, volume: Volume, cinder: Cinder, limit: Deadline,
                     holder: str, instance: Optional[str]) -> Optional[str]:
        """Before keeping a held drain: verify it, else drain again.

        A fresh listing must show the drain (core active, its class in the
        loaded IO-class table, 0 dirty): a table loaded by hand, or an
        inactive core, would leave Cinder's "drained" stronger than the
        host. Returns None if verified, else what was found (the volume
        was drained again).
        """
        with locks.volume_lock(volume.spec, limit.left()):
            reason = not_drained_reason(self.casadm, volume.spec)
        if reason is None:
            return None
        LOG.warning('Volume %(vol)s is held drained for a %(holder)s, but '
                    '%(why)s; draining it again', {
                        'vol': volume.label, 'holder': holder,
                        'why': reason})
        self.drain(volume, cinder, limit, holder=holder, instance=instance)
        return reason

    def held(self, holder: Optional[str] = None) -> list[journal.Record]:
        """Drains nova holds for an operation still running (journal)."""
        return [record for record in records()
                if record.state == DRAINED and
                record.holder not in (None, OPERATOR) and
                holder in (None, record.holder)]

    def forget(self, spec: rbd_names.ImageSpec) -> None:
        """Drop a finished hold (the operation ended elsewhere)."""
        record = read_record(spec)
        if record and record.state == DRAINED:
            remove_record(spec)


# -- drift -------------------------------------------------------------------
#: Drift kinds that are not a difference but a comparison not made
UNCHECKED = 'unchecked'
#: a journal file that is not a valid record (moved into the quarantine)
QUARANTINE = 'quarantine'


@dataclasses.dataclass(frozen=True)
class Drift:
    """A core whose real state differs from its record.

    Kind UNCHECKED: a comparison that could not be made (casadm or Cinder
    did not answer), with the reason; never to be read as "matches".
    """

    volume: str
    problem: str
    action: str
    #: 'table', 'gone-class', 'inactive', 'marker', 'held', 'journal',
    #: 'quarantine' or 'unchecked'
    kind: str = 'table'


def drift(casadm: casadm_mod.Casadm, cinder: Optional[Cinder] = None,
          caches: Optional[list[casadm_mod.CacheInstance]] = None,
          tables: Optional[dict[int, list[casadm_mod.IoClass]]] = None
          ) -> list[Drift]:
    """Each core whose real state differs from what is recorded.

    Hand-loaded IO-class rules, drain classes of cores that do not exist,
    inactive cores, unfinished transitions, drains nova holds (journal)
    that the host does not hold, journal files quarantined as invalid,
    and (with *cinder*) a marker that says "drained" for a core that is
    not. A comparison that could not be made is an UNCHECKED entry with
    the reason, never left out. *caches* and *tables* (IO-class tables by
    instance): a listing the caller already has (the exporter's scrape);
    what is missing is asked of casadm.
    """
    found: list[Drift] = []
    if caches is None:
        caches = casadm.list_caches()
    tables = dict(tables or {})
    for cache in caches:
        if cache.cache_id not in tables:
            try:
                tables[cache.cache_id] = casadm.list_io_classes(
                    cache.cache_id)
            except exception.CasError as exc:
                found.append(Drift(
                    'cache instance %d' % cache.cache_id,
                    'its IO-class table could not be read (%s): its cores '
                    'were not compared' % exc,
                    'check casadm (doctor\'s casadm check), then again',
                    UNCHECKED))
                continue
        found += _cache_drift(casadm, cinder, cache, caches, tables)
    for record in records():
        label = record.volume_id or record.spec.image
        if record.state in (DRAINING, UNDRAINING):
            found.append(Drift(
                label, 'a %s was interrupted' % record.state,
                'run "os-brick-cas undrain --volume %s" (or restart '
                'nova-compute): it finishes by the safe order' % label,
                'journal'))
        elif record.state == DRAINED:
            try:
                reason = not_drained_reason(casadm, record.spec, caches,
                                            tables)
            except exception.CasError as exc:
                found.append(Drift(
                    label, 'nova holds it drained for a %s, but whether '
                    'the host holds the drain could not be read (%s)'
                    % (record.holder, exc),
                    'check casadm, then again', UNCHECKED))
                continue
            if reason:
                found.append(Drift(
                    label, 'nova holds it drained for a %s (Cinder may '
                    'record it drained), but %s' % (record.holder, reason),
                    'run "os-brick-cas drain --volume %s" on this host (or '
                    'wait for nova-compute\'s periodic task, which drains '
                    'it again)' % label, 'held'))
    for bad in journal.quarantined():
        found.append(Drift(
            bad.path, 'a life-cycle journal file that is not a valid record '
            '(%s) was set aside; the host\'s own state decides for its '
            'volume' % bad.reason,
            'look at it (who wrote it?), then remove it', QUARANTINE))
    return found


def _cache_drift(casadm: casadm_mod.Casadm, cinder: Optional[Cinder],
                 cache: casadm_mod.CacheInstance,
                 caches: list[casadm_mod.CacheInstance],
                 tables: dict[int, list[casadm_mod.IoClass]]
                 ) -> list[Drift]:
    """drift() of one cache instance whose IO-class table was read."""
    found = []
    table = tables[cache.cache_id]
    drained = drain_mod.drained_cores(table)
    if len(drained) > 32 or table != drain_mod.compose(drained):
        found.append(Drift(
            'cache instance %d' % cache.cache_id,
            'its IO-class table is not the one os-brick-cas composes '
            '(loaded by hand?): %s' % ', '.join(
                '%d:%s:%s' % (c.class_id, c.name, c.allocation)
                for c in table),
            'run "os-brick-cas drain" or "undrain" on a volume of it: '
            'the table is composed again from this host\'s state',
            'table'))
    existing = {core.core_id for core in cache.cores}
    for core_id in sorted(drained - existing):
        found.append(Drift(
            'cache instance %d' % cache.cache_id,
            'drain class of core %d, which does not exist' % core_id,
            'harmless until a core gets id %d; the next attach drops it'
            % core_id, 'gone-class'))
    for core in cache.cores:
        named = rbd_names.parse_link_name(os.path.basename(core.device))
        if not core.active:
            found.append(Drift(
                core.device, 'core %d of instance %d is inactive: it may '
                'hold the newest data' % (core.core_id, cache.cache_id),
                'attach the volume on this host again (or detach it: '
                'the detach flushes it); see "os-brick-cas owners"',
                'inactive'))
        if named is None or cinder is None or cinder.client is None:
            continue
        volume_id = _volume_id(named)
        if volume_id is None:
            continue
        try:
            owner = cinder.client.owner(volume_id)
        except Exception as exc:
            found.append(Drift(
                volume_id, 'Cinder\'s fence marker could not be read (%s): '
                'not compared with this host' % exc,
                'check the Cinder credentials and that Cinder answers',
                UNCHECKED))
            continue
        if (owner is not None and owner.drained and
                owner.host == cinder.host):
            try:
                reason = not_drained_reason(casadm, named, caches, tables)
            except exception.CasError as exc:
                found.append(Drift(
                    volume_id, 'Cinder records it drained, but whether this '
                    'host holds the drain could not be read (%s)' % exc,
                    'check casadm, then again', UNCHECKED))
                continue
            if reason:
                found.append(Drift(
                    volume_id, 'Cinder records it drained, but %s' % reason,
                    'run "os-brick-cas drain --volume %s" (or '
                    '"undrain") so Cinder and this host agree'
                    % volume_id, 'marker'))
    return found


def _volume_id(spec: rbd_names.ImageSpec) -> Optional[str]:
    prefix = 'volume-'
    return (spec.image[len(prefix):] if spec.image.startswith(prefix)
            else None)


def volume_of(spec: rbd_names.ImageSpec) -> Volume:
    return Volume(spec, _volume_id(spec))
