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

"""Libvirt volume driver for cacheable RBD volumes.

connect: krbd + Open CAS through :class:`os_brick_cas.connector.
CachedRBDConnector`, the exported ``/dev/casX-Y`` goes to
``connection_info['data']['device_path']``; get_config: a block disk on
that path (nova's _set_cache_mode then gives it the cache/io settings of
every block volume). Encryptors attach after connect, on top of the CAS
device, so the SSD only ever holds ciphertext.

Everything else is delegation: the fence marker's attach/detach protocol
and every transition live in :mod:`os_brick_cas.lifecycle`.
"""

import contextlib

import nova.conf
from nova import exception as nova_exception
from nova import utils as nova_utils
from nova.virt.libvirt.volume import net
from nova.virt.libvirt.volume import volume as libvirt_volume
from oslo_log import log as logging

from nova_ext import compat
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


class VolumeFenced(nova_exception.Invalid):
    msg_fmt = cas_exception.VolumeFencedElsewhere.message


class LibvirtCachedRBDVolumeDriver(libvirt_volume.LibvirtBaseVolumeDriver):
    """Cacheable RBD volumes as Open CAS block disks."""

    def __init__(self, host, connector=None):
        super().__init__(host, is_block_dev=True)
        self.connector = connector or cas_connector.CachedRBDConnector(
            nova_utils.get_root_helper())
        self.net_driver = net.LibvirtNetVolumeDriver(host)
        self._tolerated: set[str] = set()

    @staticmethod
    def cached_path(connection_info) -> str | None:
        path = connection_info['data'].get('device_path')
        return path if path and path.startswith('/dev/') else None

    def get_config(self, connection_info, disk_info):
        """Block disk on the CAS device; network disk if attached uncached.

        Works from connection_info alone: during live migration the source
        builds the destination's XML from what the destination stored.
        """
        path = self.cached_path(connection_info)
        if path is None:
            return self.net_driver.get_config(connection_info, disk_info)
        conf = super().get_config(connection_info, disk_info)
        conf.source_type = 'block'
        conf.source_path = path
        # as nova's other block-device volume drivers (iscsi, fc) do
        if compat.block_volume_aio_native():
            conf.driver_io = 'native'
        return conf

    @staticmethod
    def _attachment_id(connection_info) -> str | None:
        """The Cinder attachment (our epoch): cinder puts it at the top."""
        return (connection_info.get('attachment_id') or
                connection_info['data'].get('attachment_id'))

    @property
    def machine(self) -> cas_lifecycle.Lifecycle:
        return cas_lifecycle.Lifecycle(self.connector.volume_cache.casadm)

    @staticmethod
    def cinder_view() -> cas_lifecycle.Cinder:
        """The fence marker as this nova-compute reaches it."""
        if not CONF[opts.GROUP].use_fence_marker:
            return cas_lifecycle.Cinder(CONF.host, in_use=False)
        return cas_lifecycle.Cinder(CONF.host, fence.client())

    @staticmethod
    def _subject(connection_info) -> cas_lifecycle.Volume:
        volume = cas_volume.from_connection_properties(
            connection_info['data'])
        return cas_lifecycle.Volume(volume.spec, volume.volume_id)

    def connect_volume(self, connection_info, instance):
        """Fence the volume to this host, then cache it (see lifecycle)."""
        data = connection_info['data']
        volume = cas_volume.from_connection_properties(data)

        def uncached_ok(exc: Exception) -> bool:
            return (isinstance(exc, NO_CACHE_ERRORS) and
                    CONF[opts.GROUP].no_cache_action != opts.NO_CACHE_FAIL)

        try:
            done = attachment.attach(
                self.machine, self._subject(connection_info),
                self.cinder_view(), data,
                self._attachment_id(connection_info),
                volume.mode.holds_dirty_data, self.connector.connect_volume,
                uncached_ok)
        except cas_exception.VolumeFencedElsewhere as exc:
            raise VolumeFenced(**exc.kwargs)
        if done.device_info is None:
            LOG.warning('No usable Open CAS cache for volume %s; attaching '
                        'it uncached as a librbd network disk.',
                        volume.label, instance=instance)
            data.pop('device_path', None)
            return
        data['device_path'] = done.device_info['path']
        LOG.info('Volume %(vol)s attached through Open CAS as %(path)s',
                 {'vol': volume.label, 'path': data['device_path']},
                 instance=instance)

    def disconnect_volume(self, connection_info, instance, force=False):
        """Flush, detach, then clear this host's marker (see lifecycle)."""
        data = connection_info['data']
        volume = cas_volume.from_connection_properties(data)
        try:
            done = attachment.detach(
                self.machine, self._subject(connection_info),
                self.cinder_view(), data,
                lambda props: self.connector.disconnect_volume(
                    props, None, force=force))
        except cas_exception.CasError as exc:
            if volume.volume_id not in self._tolerated:
                raise
            LOG.error('Volume %(vol)s was swapped out, but its cached data '
                      'could not be written to Ceph: %(err)s. The core and '
                      'its data stay on this host and its fence marker '
                      'stays set; see "Orphaned dirty core" in the admin '
                      'guide.', {'vol': volume.label, 'err': exc},
                      instance=instance)
            return
        if done.kept:
            LOG.warning('Leaving the cached data of volume %(vol)s on this '
                        'host untouched: %(err)s',
                        {'vol': volume.label, 'err': done.kept},
                        instance=instance)

    def extend_volume(self, connection_info, instance, requested_size):
        return self.connector.extend_volume(connection_info['data'])

    def flush(self, connection_info) -> bool:
        """Flush an attached cached volume in place (bounded)."""
        data = connection_info['data']
        subject = self._subject(connection_info)
        with locks.volume_lock(subject.spec):
            attachment.with_owner(self.cinder_view(), subject, data)
            return self.connector.flush_volume(data)

    def drain(self, connection_info,
              limit: cas_lifecycle.Deadline | None = None,
              holder: str = cas_lifecycle.OPERATOR,
              instance_uuid: str | None = None) -> bool:
        """Drain an attached volume, then tell Cinder (see lifecycle).

        *holder* names the nova operation the drain is kept for. Returns
        False if the volume has no active core here.
        """
        subject = self._subject(connection_info)
        machine = self.machine
        if cas_lifecycle.state(machine.casadm, subject.spec) in (
                cas_lifecycle.ABSENT, cas_lifecycle.INACTIVE):
            return False
        machine.drain(subject, self.cinder_view(),
                      limit or cas_lifecycle.deadline(), holder=holder,
                      instance=instance_uuid)
        return True

    def is_drained(self, connection_info) -> bool:
        """Whether the volume's core here is drained now."""
        return self.connector.is_drained(connection_info['data'])

    def drain_blocker(self, connection_info) -> str | None:
        """Why this host cannot drain the volume; None if it can."""
        return self.connector.drain_blocker(connection_info['data'])

    def reclaim_drained(self, connection_info) -> None:
        """Name this host (still drained) in the marker again (lifecycle)."""
        epoch = (self.connector.cached_epoch(connection_info['data']) or
                 self._attachment_id(connection_info))
        self.machine.reclaim(self._subject(connection_info),
                             self.cinder_view(), cas_lifecycle.deadline(),
                             epoch)

    def undrain(self, connection_info, retake: bool = False,
                holder: str | None = None,
                limit: cas_lifecycle.Deadline | None = None) -> bool:
        """Own the volume's data again, then let its core cache writes.

        See :meth:`os_brick_cas.lifecycle.Lifecycle.undrain`; a refusal is
        logged with what to do and returns False (the volume stays
        drained).
        """
        try:
            return self.machine.undrain(
                self._subject(connection_info), self.cinder_view(),
                limit or cas_lifecycle.deadline(), retake=retake,
                holder=holder)
        except cas_exception.TransitionRefused as exc:
            LOG.error('%s', exc)
            return False

    @contextlib.contextmanager
    def keeping_data_on_failed_detach(self, volume_id: str):
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
