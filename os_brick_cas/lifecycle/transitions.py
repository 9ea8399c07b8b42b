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

"""The transitions of a cached volume on this host, and their one writer.

:func:`advance` is the only code that writes a state: it takes the state
now and an event, checks them against :data:`states.TRANSITIONS`, and
journals the state the row leads to (in-flight states, and drains nova
holds for an operation) or ends the volume's record (any other stable
state: the host itself shows it). :func:`require` checks an event for
callers that change the host themselves (the connector's attach, detach
and flush, recover, discard). :class:`Lifecycle` runs the multi-step
transitions: drain, undrain, resolve (what a stopped process left),
release (the marker clear after a detach), reclaim.
"""

import dataclasses
import sys
from typing import Any, Callable, Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import deadline as deadline_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas import events
from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import identity
from os_brick_cas.lifecycle import host
from os_brick_cas.lifecycle import journal
from os_brick_cas.lifecycle import marker
from os_brick_cas.lifecycle import states
from os_brick_cas.lifecycle.states import CACHING
from os_brick_cas.lifecycle.states import DRAINED
from os_brick_cas.lifecycle.states import DRAINING
from os_brick_cas.lifecycle.states import RELEASING
from os_brick_cas.lifecycle.states import UNDRAINING
from os_brick_cas import locks
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from os_brick_cas import ownership
from os_brick_cas import rbd_names

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

Cinder = marker.Cinder

#: nova operations a drain can be held for (the CLI's is OPERATOR)
OPERATOR = 'operator'
LIVE_MIGRATION = 'live-migration'
SNAPSHOT = 'snapshot'
SWAP = 'swap'

#: one time bound for a whole operation (see os_brick_cas.deadline)
Deadline = deadline_mod.Deadline


def deadline(seconds: Optional[float] = None) -> Deadline:
    """A Deadline of *seconds*; default: one volume's flush and calls."""
    group = CONF[opts.GROUP]
    return Deadline(seconds if seconds is not None
                    else group.flush_timeout + group.casadm_timeout)


def _step(name: str) -> None:
    """Call the test hook (``lifecycle.step_hook``) at a journaled step."""
    hook: Optional[Callable[[str], None]] = getattr(
        sys.modules['os_brick_cas.lifecycle'], 'step_hook', None)
    if hook is not None:
        hook(name)


Record = journal.Record


def advance(spec: rbd_names.ImageSpec, now: str, event: str, label: str,
            record: Optional[Record] = None, **fields: Any
            ) -> Optional[Record]:
    """The one writer of states: *event* from *now*, checked, journaled.

    TransitionRefused if the table has no such row. The state it leads to
    is written (*record* with *fields*) when it is in flight, or when it
    is a drain nova holds for an operation (its holder); otherwise the
    volume's record ends: the host shows that state by itself. Returns
    the record written, or None.
    """
    target = states.next_state(now, event, label)
    written = (record or Record(spec, target)).replace(state=target,
                                                       **fields)
    if target in states.IN_FLIGHT or (
            target == DRAINED and written.holder not in (None, OPERATOR)):
        journal.write(written)
        return written
    journal.remove(spec)
    return None


def note(record: Record, **fields: Any) -> Record:
    """Rewrite an in-flight record's other fields (its phase), same state."""
    assert record.state in states.IN_FLIGHT
    record = record.replace(**fields)
    journal.write(record)
    return record


def require(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec,
            event: str, label: str, classified: Optional[str] = None,
            caches: Optional[list[casadm_output.CacheInstance]] = None
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
    record = journal.read(spec)
    if record and record.state in states.IN_FLIGHT:
        now = record.state
    elif classified is not None:
        now = classified
    else:
        found = host.locate(casadm, spec, caches)
        if (found is not None and found.core.active and
                (CACHING, event) in states.TRANSITIONS and
                (DRAINED, event) in states.TRANSITIONS):
            return      # allowed drained or not: no table needed
        now = host.state_of(casadm, found)
    if event == 'attach' and now == states.INACTIVE:
        event = 'reactivate'
    states.next_state(now, event, label)


@dataclasses.dataclass(frozen=True)
class Volume:
    """What a transition needs to name a volume."""

    spec: rbd_names.ImageSpec
    volume_id: Optional[str]

    @property
    def label(self) -> str:
        return self.volume_id or self.spec.path


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
            now = host.host_state(self.casadm, volume.spec)
            states.next_state(now, 'drain', volume.label)
            found = host.locate(self.casadm, volume.spec)
            identity.verify_link(found.core.device, 'drain volume %s'
                                 % volume.label, volume.spec)
            epoch = found.epoch
            self.refuse_other_owner(volume, cinder, found, 'drain')
            previous = journal.read(volume.spec)
            if now == DRAINED and holder != OPERATOR:
                # drained before: by an operator (no record: it stays
                # theirs), or by nova for this same operation (a retried
                # pre-check). An operator's drain always becomes theirs.
                holder = (previous and previous.holder) or OPERATOR
            record = advance(
                volume.spec, now, 'drain', volume.label, previous,
                phase='host', origin=now, volume_id=volume.volume_id,
                epoch=epoch, host=cinder.host, holder=holder,
                instance=instance or (previous and previous.instance))
            _step('drain:journaled')
            try:
                dirty = self.casadm.dirty_blocks(found.core)
                self.drains.drain_fresh(found.cache.cache_id,
                                        found.core.core_id, limit)
                _step('drain:flushed')
                reason = host.not_drained_reason(self.casadm, volume.spec)
                if reason:
                    raise exception.CasError(
                        message='volume %s is not drained after its flush: '
                                '%s' % (volume.label, reason))
            except Exception:
                advance(volume.spec, DRAINING, 'drain-failed', volume.label,
                        record, phase=None)
                raise
            record = note(record, phase='cinder')
            _step('drain:telling')
            result = self._record_drained(volume, cinder, epoch, dirty)
            _step('drain:told')
            advance(volume.spec, DRAINING, 'drain-verified', volume.label,
                    record, phase=None)
            return result

    def refuse_other_owner(self, volume: Volume, cinder: Cinder,
                           found: host.Located, action: str) -> None:
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
        if owner is None:
            return      # no marker: nobody else claims the data
        ownership.refuse_unless_owner(
            action, volume.label, found.core.cache_id, found.core.core_id,
            ownership.read(found.core.device),
            ownership.owner_epoch_of(owner.host, owner.epoch, cinder.host),
            lambda: self.casadm.dirty_blocks(found.core))

    # flush in place ----------------------------------------------------------
    def flush_in_place(self, volume: Volume, owner_epoch: Optional[str],
                       timeout: int) -> bool:
        """Flush the volume's core now, keeping it attached: the one way.

        Under the volume lock: the table's check ('flush'), the ownership
        rule (*owner_epoch*: the owning attachment; UNKNOWN: nobody to
        ask), the identity of the core's link, then the flush under the
        instance lock, bounded by *timeout*. FlushFailed/FlushTimedOut
        leave the data in the cache. False when the volume has no active
        core here (nothing to flush).
        """
        with locks.volume_lock(volume.spec):
            found = host.locate(self.casadm, volume.spec)
            if found is None or not found.core.active:
                return False
            ownership.refuse_unless_owner(
                'flush', volume.label, found.core.cache_id,
                found.core.core_id, ownership.read(found.core.device),
                owner_epoch, lambda: self.casadm.dirty_blocks(found.core))
            require(self.casadm, volume.spec, 'flush', volume.label)
            identity.verify_link(found.core.device, 'flush volume %s'
                                 % volume.label, volume.spec)
            with locks.cache_lock(found.cache.cache_id), \
                    events.timed(events.FLUSH):
                self.casadm.flush(found.cache.cache_id, found.core.core_id,
                                  timeout)
        LOG.info('Flushed volume %s in place', volume.label)
        return True

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
                record = journal.read(volume.spec)
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
        previous = journal.read(volume.spec)
        was = previous.state if rolling_back else DRAINED
        found = host.locate(self.casadm, volume.spec)
        if found is None:
            # the core went meanwhile (detached, or never there)
            advance(volume.spec, was if rolling_back else states.ABSENT,
                    'core-gone' if rolling_back else 'detach', volume.label)
            return False
        if not found.core.active:
            raise exception.TransitionRefused(
                action='undrain', volume=volume.label,
                reason='its %s is inactive; attach the volume '
                       '(re-activation) first' % found.core.label)
        drained = found.core.core_id in drain_mod.drained_cores(
            self.casadm.list_io_classes(found.cache.cache_id))
        if not drained and not rolling_back:
            advance(volume.spec, CACHING, 'undrain', volume.label)
            return False
        advance(volume.spec, was, 'resolve' if rolling_back else 'undrain',
                volume.label, previous, volume_id=volume.volume_id,
                host=cinder.host,
                phase='cinder' if cinder_told else 'host')
        _step('undrain:journaled')
        if cinder_told:
            try:
                self._weaken_cinder(volume, cinder, found.epoch, retake)
            except exception.CasError:
                # refused before the host changed: as it was (a roll-back
                # stays journaled, to be retried)
                if not rolling_back:
                    advance(volume.spec, UNDRAINING, 'undrain-refused',
                            volume.label, previous)
                raise
        _step('undrain:told')
        self.drains.undrain_fresh(found.cache.cache_id, found.core.core_id,
                                  limit)
        _step('undrain:unpinned')
        advance(volume.spec, UNDRAINING, 'undrain-done', volume.label)
        return drained

    def _weaken_cinder(self, volume: Volume, cinder: Cinder,
                       epoch: Optional[str], retake: bool) -> None:
        """Marker to "this host caches it" (CAS), before the unpin."""
        if not cinder.in_use:
            return
        owner = marker.owner_now(cinder, volume.volume_id, 'undrain')
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
        record = journal.read(spec)
        if not record or record.state not in states.IN_FLIGHT:
            return None
        volume = Volume(spec, record.volume_id)
        if record.state == RELEASING:
            return self._release_locked(volume, cinder, record, quiet)
        LOG.warning('Volume %(vol)s: resolving a %(state)s left by a '
                    'process that stopped; it goes back to caching',
                    {'vol': volume.label, 'state': record.state})
        if record.state == DRAINING and record.origin == DRAINED:
            # a repeated drain: back to where it started, still drained
            # (the host is at least as strong as before)
            advance(spec, DRAINING, 'drain-failed', volume.label,
                    record, phase=None)
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

    # the marker of a detached volume ----------------------------------------
    def released(self, volume: Volume, cinder: Cinder,
                 owner: fence.Owner) -> Optional[str]:
        """After a detach removed the core: clear this host's marker.

        Call it holding the volume lock. A clear Cinder did not take is
        journaled ("releasing") and retried by the next path that needs
        the volume and by nova-compute's periodic task; returns why it
        failed (None: cleared).
        """
        why = marker.clear(cinder, volume.volume_id, owner)
        if why is not None:
            LOG.warning('Could not clear the fence marker of volume %(vol)s '
                        'after its detach (%(why)s); it is retried (next '
                        'attach or detach, nova-compute\'s periodic task)',
                        {'vol': volume.label, 'why': why})
            advance(volume.spec, states.ABSENT, 'clear-failed', volume.label,
                    volume_id=volume.volume_id, **marker.to_record(owner))
        return why

    def _release_locked(self, volume: Volume, cinder: Cinder,
                        record: Record, quiet: bool) -> Optional[str]:
        """Retry the marker clear a "releasing" record names."""
        why = marker.clear(cinder, volume.volume_id,
                           marker.from_record(record))
        if why is None:
            advance(volume.spec, RELEASING, 'cleared', volume.label)
            return None
        advance(volume.spec, RELEASING, 'clear-failed', volume.label,
                record)
        if not quiet:
            raise exception.TransitionRefused(
                action='release', volume=volume.label,
                reason='its fence marker still names this host and Cinder '
                       'did not take the clear (%s); it is retried. Retry '
                       'when Cinder answers.' % why)
        return why

    def resolve_all(self, cinder: Cinder, limit: Deadline,
                    lock_wait: Optional[float] = None) -> dict[str, str]:
        """Resolve every unfinished transition; {volume: why not}.

        *lock_wait*: how long to wait for each volume's lock (default:
        what is left of *limit*); a lock still held means its holder is
        alive and finishes the transition itself.
        """
        unresolved = {}
        for record in list(journal.records()):
            if record.state not in states.IN_FLIGHT:
                continue
            spec = record.spec
            wait = limit.left() if lock_wait is None else lock_wait
            try:
                with locks.volume_lock(spec, wait):
                    why = self._resolve_locked(spec, cinder, limit,
                                               quiet=True)
            except exception.LockTimedOut:
                if lock_wait is None:
                    raise
                continue        # its holder is alive and finishes it
            except exception.CasError as exc:
                why = str(exc)
            if why:
                unresolved[record.volume_id or spec.image] = why
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
            states.next_state(host.state(self.casadm, volume.spec),
                              'reclaim', volume.label)
            reason = host.not_drained_reason(self.casadm, volume.spec)
            if reason:
                LOG.error('Volume %s is not drained here (%s): the fence '
                          'marker is not taken back as drained',
                          volume.label, reason)
                return False
            owner = marker.owner_now(cinder, volume.volume_id, 'reclaim')
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
            reason = host.not_drained_reason(self.casadm, volume.spec)
        if reason is None:
            return None
        LOG.warning('Volume %(vol)s is held drained for a %(holder)s, but '
                    '%(why)s; draining it again', {
                        'vol': volume.label, 'holder': holder,
                        'why': reason})
        self.drain(volume, cinder, limit, holder=holder, instance=instance)
        return reason

    def held(self, holder: Optional[str] = None) -> list[Record]:
        """Drains nova holds for an operation still running (journal)."""
        return [record for record in journal.records()
                if record.state == DRAINED and
                record.holder not in (None, OPERATOR) and
                holder in (None, record.holder)]


def volume_id_of(spec: rbd_names.ImageSpec) -> Optional[str]:
    """The Cinder volume id an image named ``volume-<id>`` belongs to."""
    prefix = 'volume-'
    return (spec.image[len(prefix):] if spec.image.startswith(prefix)
            else None)


def volume_of(spec: rbd_names.ImageSpec) -> Volume:
    return Volume(spec, volume_id_of(spec))
