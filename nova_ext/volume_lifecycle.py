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

"""nova-compute's handle on the life cycle of its cached volumes.

The volume driver (:mod:`nova_ext.volume`) attaches and detaches; the
nova driver (:mod:`nova_ext.driver`) drains, undrains and takes markers
back around live migrations, swaps and snapshots. Both reach
:mod:`os_brick_cas.lifecycle` through this class, which only turns a
connection_info into the life cycle's terms (the volume, Cinder's marker
as this nova-compute reaches it, the attachment) and adds nothing of its
own to the table.
"""

import contextlib
from typing import Iterator, Optional

import nova.conf
from oslo_log import log as logging

from nova_ext import fence
from nova_ext import opts
from os_brick_cas import connector as cas_connector
from os_brick_cas import exception as cas_exception
from os_brick_cas import lifecycle as cas_lifecycle
from os_brick_cas.lifecycle import attachment
from os_brick_cas import locks
from os_brick_cas import volume as cas_volume

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: errors that mean "this host has no usable cache for the volume"
NO_CACHE_ERRORS = (cas_exception.CasadmNotFound,
                   cas_exception.CasModuleNotLoaded,
                   cas_exception.NoCacheForMode,
                   cas_exception.CacheNotFound,
                   cas_exception.CacheNotRunning)


def uncached_ok(exc: Exception) -> bool:
    """Whether an attach may fall back to librbd after *exc*."""
    return (isinstance(exc, NO_CACHE_ERRORS) and
            CONF[opts.GROUP].no_cache_action != opts.NO_CACHE_FAIL)


def attachment_id(connection_info: dict) -> Optional[str]:
    """The Cinder attachment (our epoch): cinder puts it at the top."""
    return (connection_info.get('attachment_id') or
            connection_info['data'].get('attachment_id'))


def subject(connection_info: dict) -> cas_lifecycle.Volume:
    """The life cycle's name for the volume of *connection_info*."""
    volume = cas_volume.from_connection_properties(connection_info['data'])
    return cas_lifecycle.Volume(volume.spec, volume.volume_id)


def cinder_view() -> cas_lifecycle.Cinder:
    """The fence marker as this nova-compute reaches it."""
    if not CONF[opts.GROUP].use_fence_marker:
        return cas_lifecycle.Cinder(CONF.host, in_use=False)
    return cas_lifecycle.Cinder(CONF.host, fence.client())


class CachedVolumeLifecycle(object):
    """Life-cycle operations on cached volumes, by connection_info."""

    def __init__(self, connector: cas_connector.CachedRBDConnector):
        self.connector = connector
        self._tolerated: set[str] = set()

    @property
    def machine(self) -> cas_lifecycle.Lifecycle:
        return cas_lifecycle.Lifecycle(self.connector.volume_cache.casadm)

    def attach(self, connection_info: dict) -> attachment.Attached:
        """Fence the volume to this host, then cache it.

        Without a usable cache the volume attaches uncached (device_info
        None) if ``no_cache_action`` allows it.
        """
        data = connection_info['data']
        volume = cas_volume.from_connection_properties(data)
        return attachment.attach(
            self.machine, subject(connection_info), cinder_view(), data,
            attachment_id(connection_info), volume.mode.holds_dirty_data,
            self.connector.connect_volume, uncached_ok)

    def detach(self, connection_info: dict, force: bool
               ) -> attachment.Detached:
        """Flush, detach, then clear this host's marker.

        A failure raises, leaving core, data and marker in place, unless
        the volume is the old one of a swap past its pivot
        (:meth:`keeping_data_on_failed_detach`): then it is logged and
        the result says the data was kept.
        """
        volume = cas_volume.from_connection_properties(
            connection_info['data'])
        try:
            return attachment.detach(
                self.machine, subject(connection_info), cinder_view(),
                connection_info['data'],
                lambda props: self.connector.disconnect_volume(
                    props, None, force=force))
        except cas_exception.CasError as exc:
            if volume.volume_id not in self._tolerated:
                raise
            LOG.error('Volume %(vol)s was swapped out, but its cached data '
                      'could not be written to Ceph: %(err)s. The core and '
                      'its data stay on this host and its fence marker '
                      'stays set; see "Orphaned dirty core" in the admin '
                      'guide.', {'vol': volume.label, 'err': exc})
            return attachment.Detached(kept=str(exc))

    def flush(self, connection_info: dict) -> bool:
        """Flush an attached cached volume in place (bounded)."""
        data = connection_info['data']
        volume = subject(connection_info)
        with locks.volume_lock(volume.spec):
            attachment.with_owner(cinder_view(), volume, data)
            return self.connector.flush_volume(data)

    def drain(self, connection_info: dict,
              limit: Optional[cas_lifecycle.Deadline] = None,
              holder: str = cas_lifecycle.OPERATOR,
              instance_uuid: Optional[str] = None) -> bool:
        """Drain an attached volume, then tell Cinder.

        *holder* names the nova operation the drain is kept for. Returns
        False if the volume has no active core here.
        """
        volume = subject(connection_info)
        machine = self.machine
        if cas_lifecycle.state(machine.casadm, volume.spec) in (
                cas_lifecycle.ABSENT, cas_lifecycle.INACTIVE):
            return False
        machine.drain(volume, cinder_view(),
                      limit or cas_lifecycle.deadline(), holder=holder,
                      instance=instance_uuid)
        return True

    def is_drained(self, connection_info: dict) -> bool:
        """Whether the volume's core here is drained now."""
        return self.connector.is_drained(connection_info['data'])

    def drain_blocker(self, connection_info: dict) -> Optional[str]:
        """Why this host cannot drain the volume; None if it can."""
        return self.connector.drain_blocker(connection_info['data'])

    def reclaim_drained(self, connection_info: dict) -> None:
        """Name this host (still drained) in the marker again."""
        epoch = (self.connector.cached_epoch(connection_info['data']) or
                 attachment_id(connection_info))
        self.machine.reclaim(subject(connection_info), cinder_view(),
                             cas_lifecycle.deadline(), epoch)

    def undrain(self, connection_info: dict, retake: bool = False,
                holder: Optional[str] = None,
                limit: Optional[cas_lifecycle.Deadline] = None) -> bool:
        """Own the volume's data again, then let its core cache writes.

        See :meth:`os_brick_cas.lifecycle.Lifecycle.undrain`; a refusal is
        logged with what to do and returns False (the volume stays
        drained).
        """
        try:
            return self.machine.undrain(
                subject(connection_info), cinder_view(),
                limit or cas_lifecycle.deadline(), retake=retake,
                holder=holder)
        except cas_exception.TransitionRefused as exc:
            LOG.error('%s', exc)
            return False

    def resolve_unfinished(self, limit: cas_lifecycle.Deadline,
                           lock_wait: Optional[float] = None
                           ) -> dict[str, str]:
        """Resolve what stopped processes left; volume id -> why not."""
        return self.machine.resolve_all(cinder_view(), limit, lock_wait)

    @contextlib.contextmanager
    def keeping_data_on_failed_detach(self, volume_id: str
                                      ) -> Iterator[None]:
        """While this lasts, a failed detach of *volume_id* is not fatal.

        For the old volume of a swap after the pivot: the guest already
        runs on the new volume, so failing would make nova roll back the
        wrong attachment. The core, its dirty data, its opencas.conf row
        and the fence marker stay (see "Orphaned dirty core" runbook).
        """
        self._tolerated.add(volume_id)
        try:
            yield
        finally:
            self._tolerated.discard(volume_id)
