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
"""

import dataclasses
from typing import Any, Optional

from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas import ownership

LOG = logging.getLogger(__name__)

SET_ACTION = 'os-brick-cas-set-fence'
CLEAR_ACTION = 'os-brick-cas-clear-fence'
ATTRIBUTE = 'os-brick-cas:fence'
EPOCH_ATTRIBUTE = 'os-brick-cas:fence-epoch'
LOST_ATTRIBUTE = 'os-brick-cas:fence-lost'
DRAINED_ATTRIBUTE = 'os-brick-cas:fence-drained'


class _Unset(object):
    def __repr__(self) -> str:
        return 'UNSET'


#: ``expect`` of an unconditional set or clear
UNSET: Any = _Unset()


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
        host = getattr(volume, ATTRIBUTE, None)
        epoch = getattr(volume, EPOCH_ATTRIBUTE, None) or None
        drained = bool(epoch and
                       getattr(volume, DRAINED_ATTRIBUTE, None) == epoch)
        owner = Owner(host, epoch, drained) if host else None
        lost = []
        for entry in (getattr(volume, LOST_ATTRIBUTE, None) or '').split(
                ','):
            if entry:
                lost_host, _sep, epoch = entry.partition('/')
                lost.append(Owner(lost_host, epoch or None))
        return owner, lost

    def _check_expected(self, volume_id: str, expect: Any) -> None:
        """Raise FenceConflict unless the marker is *expect* now.

        The server checks *expect* again atomically (it is sent with the
        action); this read gives the caller the current marker.
        """
        if expect is UNSET:
            return
        current = self.owner(volume_id)
        if current != expect:
            raise exception.FenceConflict(volume=volume_id,
                                          expected=expect, current=current)

    @staticmethod
    def _expect_body(body: dict[str, Any], expect: Any) -> None:
        if expect is not UNSET:
            body['expect'] = (None if expect is None else
                              dataclasses.asdict(expect))

    def _act(self, action: str, volume_id: str, body: dict[str, Any],
             expect: Any) -> None:
        """Post *action*; Cinder's 409 (marker not *expect*) is a conflict."""
        try:
            self.cinder.volumes._action(action, volume_id, body)
        except Exception as exc:
            if getattr(exc, 'code', None) != 409:
                raise
            raise exception.FenceConflict(volume=volume_id, expected=expect,
                                          current=self.owner(volume_id))

    def set(self, volume_id: str, host: str,
            epoch: Optional[str] = None, drained: bool = False,
            expect: Any = UNSET) -> None:
        """Record that *host* (attachment *epoch*) may hold unsaved writes.

        With *drained* (needs *epoch*): it holds none and cannot get any
        until it sets the marker again without it. With *expect* (an
        Owner, or None for "no marker") the marker changes only if it is
        that now; otherwise FenceConflict (``.current``) is raised.
        """
        self._check_expected(volume_id, expect)
        body: dict[str, Any] = {'host': host}
        if epoch:
            body['epoch'] = epoch
        if drained:
            body['drained'] = True
        self._expect_body(body, expect)
        self._act(SET_ACTION, volume_id, body, expect)
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
        is set anyway. Returns the other owner that kept the marker, or
        None once it names *host*.
        """
        if not retake:
            owner = self.owner(volume_id)
            if owner is not None and owner.host != host:
                return owner
        self.set(volume_id, host, epoch, drained=drained and bool(epoch))
        return None

    def clear(self, volume_id: str, lost: bool = False,
              expect: Any = UNSET) -> None:
        """Drop the marker (after a clean detach, or knowingly).

        With *lost*, Cinder records the cleared owner as lost: only then
        may that host's stale cached data be discarded. *expect* as for
        :meth:`set`.
        """
        self._check_expected(volume_id, expect)
        body: dict[str, Any] = {'lost': True} if lost else {}
        self._expect_body(body, expect)
        self._act(CLEAR_ACTION, volume_id, body, expect)
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
