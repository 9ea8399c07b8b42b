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

"""Client side of the fence marker (python-cinderclient only).

The marker says which compute host may hold write-back data of a volume
that Ceph does not have yet. It lives in the volume's admin metadata,
written through the cinder_ext API extension (admin only), so a volume's
owner cannot clear it. Callers build the cinderclient with admin
credentials (nova's [cinder] section on a compute host).

A change can be a compare-and-swap: with ``expect`` (the Owner the caller
read, or None for "no marker") Cinder changes the marker only if it still
holds that record, and answers 409 otherwise (:class:`FenceConflict
<os_brick_cas.exception.FenceConflict>`, carrying what it holds), so two
racing writers cannot both win. Without it (``UNSET``) the change is
unconditional, as before.
"""

import dataclasses
import enum
from typing import Any, Literal, Optional, Union

from cinderclient import exceptions as cinder_exceptions
from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas import fence_wire as wire
from os_brick_cas import ownership
from os_brick_cas import validation

LOG = logging.getLogger(__name__)

#: how many times :meth:`FenceClient.take` reads again after a conflict
TAKE_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True)
class Owner:
    """Who owns a volume's newest cached data: a host and an attachment.

    *epoch* is the Cinder attachment that cached the data; None for a
    marker set before epochs were recorded (the host alone is known).
    *drained*: that attachment's host drained the volume - Ceph has every
    acknowledged write and none can get dirty - so another host may take
    the marker over (a live migration's destination).
    """

    host: str
    epoch: Optional[str] = None
    drained: bool = False

    def label(self) -> str:
        """E.g. ``host cmp1, attachment A, drained`` (for messages)."""
        return 'host %s, attachment %s%s' % (
            self.host, self.epoch or '(not recorded)',
            ', drained' if self.drained else '')


class _Unset(enum.Enum):
    UNSET = 'UNSET'

    def __repr__(self) -> str:
        return 'UNSET'


#: ``expect=UNSET``: change the marker whatever it is now (the behaviour
#: before compare-and-swap; what older callers get)
UNSET = _Unset.UNSET
#: what a compare-and-swap change expects: an owner, None (no marker) or
#: UNSET (no condition)
Expected = Union[Optional[Owner], Literal[_Unset.UNSET]]


def describe(owner: Optional[Owner]) -> str:
    """*owner* for a message; None is "no marker"."""
    return 'the marker naming ' + owner.label() if owner else 'no marker'


def _wire(expect: Optional[Owner]) -> Optional[dict[str, Any]]:
    """*expect* as the API's ``expect`` object (None: no marker)."""
    if expect is None:
        return None
    return {wire.HOST: expect.host, wire.EPOCH: expect.epoch,
            wire.DRAINED: expect.drained}


def _owner_from_wire(record: Any) -> Optional[Owner]:
    """The ``current`` record of a 409 body as an Owner (None: none)."""
    if record is None or not record.get(wire.HOST):
        return None
    return Owner(record[wire.HOST], record.get(wire.EPOCH) or None,
                 bool(record.get(wire.DRAINED)))


def _conflict_record(body: Any) -> tuple[bool, Optional[Owner]]:
    """(whether a 409 *body* is the extension's CAS refusal, its record)."""
    try:
        return True, _owner_from_wire(body['conflict']['current'])
    except (AttributeError, KeyError, TypeError):
        return False, None


class FenceClient(object):
    """Read, set and clear a volume's fence marker."""

    def __init__(self, cinder: Any):
        """*cinder* is a ``cinderclient.v3.client.Client`` (admin)."""
        self.cinder = cinder

    def get(self, volume_id: str) -> Optional[str]:
        """The host named by the marker, or None."""
        owner = self.owner(volume_id)
        return owner.host if owner else None

    def owner(self, volume_id: str) -> Optional[Owner]:
        """The (host, attachment epoch) the marker names, or None."""
        return self.record(volume_id)[0]

    def lost(self, volume_id: str) -> list[Owner]:
        """Owners whose cached data of the volume was declared lost."""
        return self.record(volume_id)[1]

    def record(self, volume_id: str
               ) -> tuple[Optional[Owner], list[Owner]]:
        """The owner and the owners declared lost, from one volume show."""
        volume = self.cinder.volumes.get(volume_id)
        host = getattr(volume, wire.ATTRIBUTE, None)
        epoch = getattr(volume, wire.EPOCH_ATTRIBUTE, None) or None
        drained = bool(epoch and
                       getattr(volume, wire.DRAINED_ATTRIBUTE, None) == epoch)
        owner = Owner(host, epoch, drained) if host else None
        lost = []
        for entry in (getattr(volume, wire.LOST_ATTRIBUTE, None) or '').split(
                wire.LOST_SEPARATOR):
            if entry:
                lost_host, _sep, epoch = entry.partition(
                    wire.LOST_HOST_SEPARATOR)
                lost.append(Owner(lost_host, epoch or None))
        return owner, lost

    def _action(self, action: str, volume_id: str, body: dict[str, Any],
                expect: Expected) -> None:
        """POST *action*; with *expect*, only if the marker is that.

        :raises exception.FenceConflict: Cinder holds another record.
        """
        if expect is not UNSET:
            body[wire.EXPECT] = _wire(expect)
        # cinderclient has no class for 409 and drops the body: read it
        http = self.cinder.client
        response, answer = http.post('/volumes/%s/action' % volume_id,
                                     body={action: body}, raise_exc=False)
        if response.status_code < 400:
            return
        ours, current = _conflict_record(answer)
        if response.status_code == 409 and ours:
            raise exception.FenceConflict(
                volume=volume_id, expected=describe(expect),
                current_label=describe(current), current=current)
        raise cinder_exceptions.from_response(response, answer)

    def set(self, volume_id: str, host: str,
            epoch: Optional[str] = None, drained: bool = False,
            expect: Expected = UNSET) -> None:
        """Record that *host* (attachment *epoch*) may hold unsaved writes.

        With *drained* (needs *epoch*): it holds none and cannot get any
        until it sets the marker again without it. With *expect* (an
        Owner, or None for "no marker"), Cinder changes the marker only
        if that is what it holds (compare-and-swap).

        :raises exception.FenceConflict: *expect* is not what Cinder holds.
        :raises exception.InvalidInput: a host or epoch the API refuses.
        """
        body: dict[str, Any] = {wire.HOST: validation.fence_host(host)}
        if epoch:
            body[wire.EPOCH] = validation.epoch(epoch)
        if drained:
            body[wire.DRAINED] = True
        self._action(wire.SET_ACTION, volume_id, body, expect)
        LOG.info('Fence marker of volume %(vol)s set to host %(host)s '
                 '(attachment %(epoch)s%(drained)s)',
                 {'vol': volume_id, 'host': host, 'epoch': epoch,
                  'drained': ', drained' if drained else ''})

    def take(self, volume_id: str, host: str, epoch: Optional[str],
             retake: bool = False, drained: bool = False
             ) -> Optional[Owner]:
        """Name *host*/*epoch* as the owner, unless another host is named.

        Called before a drained core may get dirty again. With *retake*
        the caller knows the other host never ran the guest and the marker
        is set anyway; otherwise the change is a compare-and-swap on the
        marker read (read again, up to TAKE_ATTEMPTS times, if it changed
        meanwhile). Returns the other owner that kept the marker, or None
        once it names *host*.

        :raises exception.FenceConflict: it kept changing meanwhile.
        """
        drained = drained and bool(epoch)
        if retake:
            self.set(volume_id, host, epoch, drained=drained)
            return None
        # compare-and-swap on what was read: a marker another host set
        # meanwhile is read again, never overwritten
        attempt = 1
        while True:
            owner = self.owner(volume_id)
            if owner is not None and owner.host != host:
                return owner
            try:
                self.set(volume_id, host, epoch, drained=drained,
                         expect=owner)
                return None
            except exception.FenceConflict:
                if attempt >= TAKE_ATTEMPTS:
                    raise
                attempt += 1
                LOG.info('Fence marker of volume %s changed while host %s '
                         'took it; reading it again', volume_id, host)

    def clear(self, volume_id: str, lost: bool = False,
              expect: Expected = UNSET) -> None:
        """Drop the marker (after a clean detach, or knowingly).

        With *lost*, Cinder records the cleared owner as lost: only then
        may that host's stale cached data be discarded. With *expect*,
        only if the marker is that (see :meth:`set`).

        :raises exception.FenceConflict: *expect* is not what Cinder holds.
        """
        self._action(wire.CLEAR_ACTION, volume_id,
                     {wire.LOST: True} if lost else {}, expect)
        LOG.info('Fence marker of volume %s cleared%s', volume_id,
                 ' (owner declared lost)' if lost else '')


def may_record_drain(owner: Optional[Owner], host: str,
                     epoch: Optional[str]) -> bool:
    """Whether *host* may mark its attachment *epoch* drained.

    Only the owner the marker names (an epoch-less marker predates
    epochs), and only with an attachment to name.
    """
    return bool(epoch and owner is not None and owner.host == host and
                owner.epoch in (None, epoch))


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What the data a host caches of a volume is, per Cinder's record."""

    owner: Optional[Owner]
    verdict: str

    @property
    def owner_label(self) -> str:
        return ('%s/%s' % (self.owner.host, self.owner.epoch)
                if self.owner else 'no owner')


def judge(client: FenceClient, volume_id: str, attachment: Optional[str],
          dirty_blocks: Optional[int], host: str) -> Judgement:
    """Compare the attachment cached on *host* with Cinder's owner."""
    owner, lost = client.record(volume_id)
    return Judgement(owner, ownership.verdict(
        attachment, dirty_blocks, owner.host if owner else None,
        owner.epoch if owner else None, {o.epoch for o in lost}, host))
