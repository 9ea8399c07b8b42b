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

"""Cinder's view of a volume: the fence marker, and how attach/detach move it.

The marker names the host (and attachment, the epoch) whose cache may
hold the volume's newest data, and whether that host drained it. The
rule: it is never stronger than the host. So, at attach, a marker that
says "drained" for this host is weakened by compare-and-swap *before*
the core may cache writes; at detach, the marker is cleared only after
the core is flushed and removed, and a clear Cinder did not take is an
in-flight state ("releasing", journaled by
:func:`os_brick_cas.lifecycle.transitions.advance`), retried by the next
attach or detach of the volume and by nova-compute's periodic task.

The caller holds the volume lock around each marker write and the host
change it belongs to.
"""

import dataclasses
import enum
from typing import Optional

from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas.lifecycle import states
from os_brick_cas import ownership

LOG = logging.getLogger(__name__)


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


def owner_now(cinder: Cinder, volume_id: Optional[str], action: str
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


class Claim(enum.Enum):
    """What an attach did to the marker (so a failed attach can undo it)."""

    UNUSED = 'unused'     #: no marker kept for this volume or deployment
    SET = 'set'           #: this attach set it (there was none)
    HELD = 'held'         #: it already named this host
    TAKEN = 'taken'       #: taken over from a host that drained it


@dataclasses.dataclass(frozen=True)
class Attach:
    """The marker side of one attach: what it did, and the owner now.

    *owner_epoch*: ``cas_owner_epoch`` for the host library ('' = the
    data here is not the newest, None = not known: nothing checked).
    """

    claim: Claim
    before: Optional[fence.Owner]
    owner_epoch: Optional[str] = None


def owner_epoch(owner: Optional[fence.Owner], host: str) -> Optional[str]:
    """``cas_owner_epoch`` for the host library (see RBDVolume).

    '' when the marker names another host or none (whatever this host
    caches is not the newest); None for a marker from before epochs.
    """
    if owner is None:
        return ''
    return ownership.owner_epoch_of(owner.host, owner.epoch, host)


def owner_epoch_now(cinder: Cinder, volume_id: Optional[str]
                    ) -> Optional[str]:
    """The owning attachment as the ownership rule reads it, or UNKNOWN.

    UNKNOWN (None) when Cinder cannot be asked or keeps no marker for the
    volume: an active core's cleaner writes its data anyway.
    """
    if cinder.client is None or volume_id is None:
        return ownership.UNKNOWN
    try:
        owner = cinder.client.owner(volume_id)
    except Exception as exc:
        LOG.warning('Cannot ask Cinder who owns volume %(vol)s (%(err)s)',
                    {'vol': volume_id, 'err': exc})
        return ownership.UNKNOWN
    if owner is None:
        return ownership.UNKNOWN
    return ownership.owner_epoch_of(owner.host, owner.epoch, cinder.host)


def claim(cinder: Cinder, volume_id: str, label: str, epoch: Optional[str],
          holds_dirty_data: bool) -> Attach:
    """Before an attach caches anything: check the marker and claim it.

    Refuses (VolumeFencedElsewhere) if another host may hold the newest
    data. A marker of another host that *drained* the volume (a live
    migration's source) is taken over. A marker naming this host as
    drained is weakened to "caching" first, by compare-and-swap, before
    the core may cache writes: a re-attach (hard reboot) never leaves
    Cinder saying drained for a core that caches. Checked for every
    cacheable volume, whatever its mode now (it may have been retyped
    while another host still held its newest writes).
    """
    if not cinder.in_use:
        return Attach(Claim.UNUSED, None)
    before = cinder.client.owner(volume_id)
    if before and before.host != cinder.host and not before.drained:
        raise exception.VolumeFencedElsewhere(
            volume=volume_id, fenced=before.host, host=cinder.host)
    theirs = owner_epoch(before, cinder.host) if epoch else None
    if not holds_dirty_data:
        return Attach(Claim.UNUSED, before, theirs)
    if before is not None and before.host != cinder.host:
        LOG.info('Volume %(vol)s was drained by host %(host)s (attachment '
                 '%(epoch)s); this host takes its fence marker over',
                 {'vol': label, 'host': before.host, 'epoch': before.epoch})
        cinder.client.set(volume_id, cinder.host, epoch, expect=before)
        return Attach(Claim.TAKEN, before, epoch or None)
    if before is not None:
        if before.drained:
            # weaker first: the core this attach makes may cache writes
            LOG.info('Volume %s: its fence marker says drained; it says '
                     'caching before the attach', label)
            cinder.client.set(volume_id, cinder.host, before.epoch,
                              expect=before)
            before = fence.Owner(cinder.host, before.epoch, False)
        return Attach(Claim.HELD, before, theirs)
    cinder.client.set(volume_id, cinder.host, epoch, expect=None)
    return Attach(Claim.SET, before, theirs)


def attached(cinder: Cinder, volume_id: str, done: Attach,
             epoch: Optional[str]) -> None:
    """After the core was added: a held marker names this attachment."""
    if (done.claim is Claim.HELD and epoch and
            done.before.epoch != epoch):
        # this attachment now owns the data the earlier one cached
        cinder.client.set(volume_id, cinder.host, epoch, expect=done.before)


def undo(cinder: Cinder, volume_id: str, label: str, done: Attach,
         epoch: Optional[str]) -> None:
    """After a failed attach: clear what it set, hand a taken one back.

    Compare-and-swap on the marker this attach wrote: if someone changed
    it meanwhile, theirs stays. Nothing of the volume is cached here.
    """
    ours = fence.Owner(cinder.host, epoch, False)
    try:
        if done.claim is Claim.SET:
            cinder.client.clear(volume_id, expect=ours)
        elif done.claim is Claim.TAKEN and done.before is not None:
            cinder.client.set(volume_id, done.before.host, done.before.epoch,
                              drained=done.before.drained, expect=ours)
    except Exception:
        LOG.exception('Could not undo the fence marker write of volume %s '
                      'after its attach failed; nothing of it is cached '
                      'on this host. "os-brick-cas fence-clear %s" clears '
                      'it.', label, volume_id)


def owner_for_detach(cinder: Cinder, volume_id: str
                     ) -> Optional[fence.Owner]:
    """Who owns the newest data now (an evacuation may have moved it)."""
    if not cinder.in_use:
        return None
    return cinder.client.owner(volume_id)


def clear(cinder: Cinder, volume_id: str, expect: fence.Owner
          ) -> Optional[str]:
    """Clear this host's marker (CAS on *expect*); None, or why not.

    A marker that changed meanwhile is someone else's now: nothing left
    to clear, which counts as done.
    """
    if cinder.client is None:
        return cinder.problem or 'no Cinder credentials'
    try:
        cinder.client.clear(volume_id, expect=expect)
    except exception.FenceConflict:
        return None
    except Exception as exc:
        return str(exc) or exc.__class__.__name__
    return None


def to_record(owner: fence.Owner) -> dict:
    """A "releasing" journal record's fields for the marker to clear.

    The record's host and epoch are the marker's; its origin says whether
    the marker said drained.
    """
    return {'host': owner.host, 'epoch': owner.epoch,
            'origin': states.DRAINED if owner.drained else states.CACHING}


def from_record(record) -> fence.Owner:
    """The marker a "releasing" journal record is to clear."""
    return fence.Owner(record.host, record.epoch,
                       record.origin == states.DRAINED)
