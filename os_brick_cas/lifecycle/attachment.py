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

"""nova's attach and detach of a cached volume: marker and host, one step.

Each runs under the volume's lock (re-entrant: the connector takes it
again), so no drain, undrain, flush or detach of the CLI, the periodic
task or another nova thread lands between a marker write and the host
change it belongs to. First, an unfinished transition a stopped process
left (or a marker clear Cinder did not take) is resolved: nothing waits
for a human or a restart.

* attach: claim the marker (:func:`marker.claim`: a marker saying
  "drained" for this host is weakened first), let the connector add the
  core, then name this attachment in a marker that named an earlier one;
  a failed attach undoes its marker write.
* detach: read the owner now, let the connector flush and remove the
  core (it refuses to write data this host does not own), then clear
  this host's marker; a clear Cinder did not take is journaled
  ("releasing") and retried.
"""

import dataclasses
from typing import Any, Callable, Optional

from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas.lifecycle import marker
from os_brick_cas.lifecycle import transitions
from os_brick_cas import locks

LOG = logging.getLogger(__name__)

Props = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Attached:
    """An attach's result: the connector's device info, or None (uncached).

    *claim*: what the attach did to the marker.
    """

    device_info: Optional[dict]
    claim: marker.Claim


@dataclasses.dataclass(frozen=True)
class Detached:
    """A detach's result (all None: detached, marker cleared).

    *kept*: why the cached data stayed (not this host's to write);
    *release_failed*: why the marker clear is still pending (journaled).
    """

    kept: Optional[str] = None
    release_failed: Optional[str] = None


def resolve_first(machine: transitions.Lifecycle,
                  volume: transitions.Volume, cinder: marker.Cinder,
                  action: str) -> None:
    """Resolve what a stopped process left of *volume*; else refuse."""
    why = machine.resolve(volume.spec, cinder, transitions.deadline())
    if why:
        raise exception.TransitionRefused(action=action, volume=volume.label,
                                          reason=why)


def attach(machine: transitions.Lifecycle, volume: transitions.Volume,
           cinder: marker.Cinder, props: Props, epoch: Optional[str],
           holds_dirty_data: bool, connect: Callable[[Props], dict],
           uncached_ok: Callable[[Exception], bool]) -> Attached:
    """Claim the marker, then cache the volume (see module doc).

    *uncached_ok*: whether the caller attaches uncached after *connect*
    raised this error (no usable cache here); never when the marker
    already named this host (its newest data may be in this cache).
    """
    with locks.volume_lock(volume.spec):
        resolve_first(machine, volume, cinder, 'attach')
        for key in ('cas_epoch', 'cas_owner_epoch'):
            props.pop(key, None)
        if epoch:
            # a core is reused only by the attachment that added it
            props['cas_epoch'] = epoch
        done = marker.claim(cinder, volume.volume_id, volume.label, epoch,
                            holds_dirty_data)
        if done.owner_epoch is not None:
            props['cas_owner_epoch'] = done.owner_epoch
        try:
            device_info = connect(props)
        except Exception as exc:
            # the connector rolled back: nothing of this volume is cached
            marker.undo(cinder, volume.volume_id, volume.label, done, epoch)
            if done.claim is not marker.Claim.HELD and uncached_ok(exc):
                return Attached(None, done.claim)
            raise
        marker.attached(cinder, volume.volume_id, done, epoch)
        return Attached(device_info, done.claim)


def detach(machine: transitions.Lifecycle, volume: transitions.Volume,
           cinder: marker.Cinder, props: Props,
           disconnect: Callable[[Props], None]) -> Detached:
    """Flush and remove the core, then clear this host's marker."""
    with locks.volume_lock(volume.spec):
        resolve_first(machine, volume, cinder, 'detach')
        owner = with_owner(cinder, volume, props)
        try:
            # raises, leaving everything in place, if dirty data could be
            # lost; refuses to write data this host no longer owns
            disconnect(props)
        except exception.NotDataOwner as exc:
            # e.g. the instance was evacuated while this host was down:
            # keep the stale blocks, never write them over newer data
            return Detached(kept=str(exc))
        if owner is not None and owner.host == cinder.host:
            return Detached(release_failed=machine.released(
                volume, cinder, owner))
        return Detached()


def with_owner(cinder: marker.Cinder, volume: transitions.Volume,
               props: Props):
    """Put the owner Cinder names *now* into *props*; return it.

    What connect stored in the BDM's connection_info may be stale.
    """
    props.pop('cas_owner_epoch', None)
    owner = marker.owner_for_detach(cinder, volume.volume_id)
    if cinder.in_use:
        theirs = marker.owner_epoch(owner, cinder.host)
        if theirs is not None:
            props['cas_owner_epoch'] = theirs
    return owner
