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

"""Which cinder operations would read a stale image, and the refusals.

While a write-back/write-only volume is attached, the newest data may live
only in the compute host's Open CAS cache: the RBD image is stale until the
host flushes it at detach. Snapshots, backups and clones taken from the
image then would silently miss the newest writes, so they are refused.
The same holds, whatever the attach status, while the volume's fence
marker names a host: its cache may still hold such writes (an orphaned
dirty core), until that host flushes them or they are declared lost.

The fence marker's keys are admin metadata, which cinder loads only for
admin contexts: :func:`read_marker` is the one place that reads them, from
the database with an elevated context, so a user's request gets the same
refusals and allowances as an admin's.
"""

import dataclasses
from typing import Any, Mapping, Optional

from cinder import exception

from cinder_ext import extra_specs
from os_brick_cas import fence_wire as wire

ATTACHED_STATES = ('in-use', 'attaching', 'detaching', 'reserved')
FENCE_KEY = 'os_brick_cas_fence'
FENCE_EPOCH_KEY = 'os_brick_cas_fence_epoch'
#: owners declared lost ("host/epoch", newest last, comma separated)
FENCE_LOST_KEY = 'os_brick_cas_fence_lost'
#: the marker's attachment, when its host drained the volume (no dirty
#: data, and none can appear) - the marker stays, the handover is allowed
FENCE_DRAINED_KEY = 'os_brick_cas_fence_drained'
_LOST_MAX_CHARS = 255


def type_specs(volume_type: Any) -> Mapping[str, str]:
    """Extra specs of a VolumeType object or dict (or None)."""
    if not volume_type:
        return {}
    if isinstance(volume_type, Mapping):
        return volume_type.get('extra_specs') or {}
    return getattr(volume_type, 'extra_specs', None) or {}


def cache_spec(volume: Any) -> extra_specs.CacheSpec:
    """The cache spec of a volume's type (invalid specs raise)."""
    try:
        return extra_specs.validate(type_specs(volume.volume_type))
    except extra_specs.ExtraSpecError as exc:
        raise exception.InvalidVolumeType(reason=str(exc))


def is_attached(volume: Any) -> bool:
    return (volume.status in ATTACHED_STATES or
            getattr(volume, 'attach_status', None) == 'attached')


def refuse_if_dirty_capable(volume: Any, operation: str,
                            allow_drained: bool = False) -> None:
    """Refuse *operation* while a host may hold writes Ceph lacks.

    That is an attached write-back/write-only volume, and any volume
    whose fence marker names a host, whatever its type and attach status
    say now (:func:`refuse_if_marked`). With *allow_drained*, a volume
    whose owning attachment drained it (Ceph has every acknowledged
    write, and no write can get dirty) is allowed: e.g. nova's snapshot
    of a volume-backed server, which drains under the guest's quiesce.
    """
    spec = cache_spec(volume)
    if not (spec.holds_dirty_data and is_attached(volume)):
        refuse_if_marked(volume, operation, allow_drained=allow_drained)
        return
    if allow_drained and is_drained(volume):
        return
    raise exception.InvalidVolume(reason=(
        'cannot %(op)s volume %(vol)s while it is attached: its type '
        'caches it on the compute host in Open CAS mode %(mode)s, so '
        'the newest writes may not be in Ceph yet. Drain it first '
        "('os-brick-cas drain --volume %(vol)s' on its compute host, with "
        'admin credentials so that Cinder records the drain; nova does '
        'this itself for the snapshot of a quiesced volume-backed '
        'server), detach it (which flushes the cache), or use a '
        "write-through ('wt') volume type." % {
            'op': operation, 'vol': volume.id, 'mode': spec.mode}))


def refuse_if_marked(volume: Any, operation: str,
                     allow_drained: bool = False) -> None:
    """Refuse *operation* on a volume whose fence marker names a host.

    The marker, not the attach status, says whether a host may hold
    writes Ceph lacks: an *available* volume keeps it while the orphaned
    dirty core of a deleted server or a force-detach is still on that
    host, and a volume retyped to write-through keeps it until that
    host's core is flushed. With *allow_drained*, a marker whose own,
    current attachment drained the volume is allowed (see
    :func:`is_drained`).
    """
    marker = read_marker(volume)
    if not marker.host:
        return
    if allow_drained and is_drained(volume, marker):
        return
    raise exception.InvalidVolume(reason=(
        'cannot %(op)s volume %(vol)s: its fence marker names host '
        '%(host)s (attachment %(epoch)s), whose Open CAS cache may hold '
        'writes that are not in Ceph yet, whatever the volume\'s status '
        'says (e.g. the orphaned dirty core a deleted server or a '
        'force-detach left there). If it is attached there, detach it '
        'cleanly. Otherwise, on %(host)s, write that data to Ceph: '
        "'os-brick-cas recover --volume %(vol)s'; only if %(host)s is lost "
        "for good, declare its data lost: 'os-brick-cas fence-clear "
        "%(vol)s --host-lost' (and, should it return, drop the data there: "
        "'os-brick-cas discard --volume %(vol)s --yes')." % {
            'op': operation, 'vol': volume.id, 'host': marker.host,
            'epoch': marker.epoch or '(not recorded)'}))


def type_cache_spec(new_type: Any) -> extra_specs.CacheSpec:
    """The cache spec of a volume type (invalid specs raise)."""
    try:
        return extra_specs.validate(type_specs(new_type))
    except extra_specs.ExtraSpecError as exc:
        raise exception.InvalidVolumeType(reason=str(exc))


def changes_only_the_share(volume: Any, new_type: Any) -> bool:
    """Whether retyping *volume* to *new_type* changes only its share.

    Same cacheable mode, another ``cas:cache_share`` (set, changed or
    removed). Such a retype is done in place, attached or not, fenced or
    not: a share is a cap on cache use, not data, and nothing is copied.
    An attached volume's core keeps its old share until the volume's
    next attach (its next connection: detach and attach, live migration,
    unshelve), which reads the new type; a hard reboot reuses the
    connection nova stored, and with it the old share.
    """
    old = cache_spec(volume)
    new = type_cache_spec(new_type)
    return (old.cacheable and new.cacheable and old.mode == new.mode and
            old.share != new.share)


def refuse_cache_change_while_attached(volume: Any,
                                       new_type: Any) -> None:
    """Refuse a retype that changes the cache mode of an attached volume.

    A change of the share alone is allowed (:func:`changes_only_the_share`).
    """
    old = cache_spec(volume)
    new = type_cache_spec(new_type)
    if changes_only_the_share(volume, new_type):
        return
    if old != new and is_attached(volume):
        raise exception.InvalidVolume(reason=(
            'cannot retype attached volume %s from cache mode %s to %s: the '
            'compute host chose its cache at attach time. Detach it (which '
            'flushes the cache), retype, and attach it again.'
            % (volume.id, _described(old), _described(new))))


def _described(spec: extra_specs.CacheSpec) -> str:
    """A cache spec as a retype refusal names it (mode and share)."""
    if spec.share is None:
        return spec.mode or 'uncached'
    return '%s with a %d%% share' % (spec.mode, spec.share)


def refuse_attached_extend(volume: Any) -> None:
    """Refuse to extend an attached cached volume."""
    if cache_spec(volume).cacheable and is_attached(volume):
        raise exception.InvalidVolume(reason=(
            'cannot extend volume %s while it is attached: it is an Open CAS '
            'core on the compute host and a core cannot change size while '
            'cached. Detach it, extend it, and attach it again.'
            % volume.id))


@dataclasses.dataclass(frozen=True)
class Marker:
    """A volume's fence marker, as its admin metadata keys hold it."""

    #: the host whose cache may hold writes Ceph lacks (None: no marker)
    host: Optional[str] = None
    #: the attachment that cached them (None: not recorded)
    epoch: Optional[str] = None
    #: the attachment whose host drained the volume
    drained_epoch: Optional[str] = None
    #: owners ("host/epoch") whose cached data was declared lost
    lost: tuple[str, ...] = ()

    @classmethod
    def parse(cls, metadata: Mapping[str, str]) -> 'Marker':
        """The marker in a volume's admin metadata."""
        return cls(metadata.get(FENCE_KEY) or None,
                   metadata.get(FENCE_EPOCH_KEY) or None,
                   metadata.get(FENCE_DRAINED_KEY) or None,
                   tuple(entry for entry in (
                       metadata.get(FENCE_LOST_KEY) or '').split(
                           wire.LOST_SEPARATOR) if entry))

    @property
    def drained(self) -> bool:
        """Its own attachment drained the volume (the flag names it)."""
        return bool(self.host and self.epoch and
                    self.drained_epoch == self.epoch)

    def record(self) -> Optional[dict[str, Any]]:
        """The API's owner record (compare-and-swap); None: no marker."""
        if not self.host:
            return None
        return {'host': self.host, 'epoch': self.epoch,
                'drained': self.drained}

    def lost_with_owner(self) -> str:
        """The lost record with this marker's ``host/epoch`` appended.

        Oldest entries go first when the admin metadata value would
        exceed 255 characters.
        """
        entries = list(self.lost) + [wire.LOST_HOST_SEPARATOR.join(
            (self.host or '', self.epoch or ''))]
        while (len(wire.LOST_SEPARATOR.join(entries)) > _LOST_MAX_CHARS and
               len(entries) > 1):
            entries.pop(0)
        return wire.LOST_SEPARATOR.join(entries)


def read_marker(volume: Any) -> Marker:
    """The fence marker of *volume*, whoever's request it serves.

    A cinder Volume object is read from the database with an elevated
    context: cinder loads ``admin_metadata`` only for admin contexts (a
    user's request would see no marker), and the object may predate the
    marker's last change. Any other record (a test's plain stand-in) is
    taken to carry its complete ``admin_metadata``.
    """
    request_context = getattr(volume, '_context', None)
    if request_context is None or not hasattr(volume, 'obj_attr_is_set'):
        return Marker.parse(getattr(volume, 'admin_metadata', None) or {})
    # cinder.db.api registers cinder's options: imported on first use so
    # that nova-side tests can apply these rules to plain records
    from cinder import context as cinder_context
    from cinder.db import api as db
    from cinder import exception as cinder_exception
    elevated = getattr(request_context, 'elevated', None)
    # a caller's bare context (cinder's own driver tests pass {}) still
    # gets the marker, read as the admin
    admin = (elevated() if callable(elevated) else
             cinder_context.get_admin_context())
    try:
        return Marker.parse(db.volume_admin_metadata_get(admin, volume.id))
    except cinder_exception.VolumeNotFound:
        # an object that was never saved (a driver called on a volume
        # the database does not hold): what it carries is all there is
        return Marker.parse(getattr(volume, 'admin_metadata', None) or {})


def attachment_ids(volume: Any) -> set[str]:
    """Ids of the volume's Cinder attachments."""
    ids = set()
    for attachment in getattr(volume, 'volume_attachment', None) or []:
        attachment_id = (attachment.get('id')
                         if isinstance(attachment, Mapping)
                         else getattr(attachment, 'id', None))
        if attachment_id:
            ids.add(attachment_id)
    return ids


def is_drained(volume: Any, marker: Optional[Marker] = None) -> bool:
    """Whether the marker's own attachment drained the volume.

    Exactly that epoch: a drained flag left by an earlier attachment, or
    by an attachment that no longer exists, does not count.
    """
    marker = marker or read_marker(volume)
    return marker.drained and marker.epoch in attachment_ids(volume)


def refuse_fenced_connection(volume: Any, connector: Optional[dict]) -> None:
    """Refuse to connect a volume fenced by another host, in any mode.

    The fenced host may hold the volume's newest writes whatever the
    volume's type says now (it may have been retyped since) - unless it
    drained the volume: then Ceph has every acknowledged write and the
    fenced host cannot cache a new one (a live migration's destination
    attaches now; nova_ext on that host takes the marker over).
    """
    marker = read_marker(volume)
    fenced_by = marker.host
    host = (connector or {}).get('host')
    if (fenced_by and host and fenced_by != host and
            not is_drained(volume, marker)):
        raise exception.InvalidVolume(reason=(
            'volume %(vol)s may still hold write-back data in the Open CAS '
            'cache of host %(fenced)s, so it cannot be attached on %(host)s. '
            'Detach it cleanly on %(fenced)s, or - if that host is lost and '
            'its cached writes with it - clear the fence knowingly: '
            "'os-brick-cas fence-clear %(vol)s'."
            % {'vol': volume.id, 'fenced': fenced_by, 'host': host}))
