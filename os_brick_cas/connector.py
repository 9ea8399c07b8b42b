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

"""Connector for Cinder RBD volumes cached on the host with Open CAS.

Attach: krbd map through os-brick's RBDConnector local attach (stable path
``/dev/rbd/<pool>/<image>``), make sure ``/dev/disk/by-id/rbd-<pool>-<image>``
names that device (casadm takes nothing else), add it as a core to the
instance serving the volume's cache mode, return ``/dev/casX-Y``.
Detach: flush when the mode can hold dirty data, remove the core, unmap.
Every failure rolls back what this call did; dirty data is never dropped.
"""

from typing import Any, Optional

from os_brick import exception as brick_exception
from os_brick.initiator.connectors import rbd
from os_brick import utils as brick_utils
from oslo_log import log as logging
from oslo_utils import excutils

from os_brick_cas import cache as cache_mod
from os_brick_cas import devlinks
from os_brick_cas import exception
from os_brick_cas import locks
from os_brick_cas import volume as volume_mod

LOG = logging.getLogger(__name__)


class CachedRBDConnector(rbd.RBDConnector):
    """RBD connector that puts the krbd device behind Open CAS."""

    def __init__(self, root_helper: Optional[str] = None, *args,
                 volume_cache: Optional[cache_mod.VolumeCache] = None,
                 **kwargs):
        kwargs['do_local_attach'] = True
        super().__init__(root_helper, *args, **kwargs)
        self.volume_cache = volume_cache or cache_mod.VolumeCache()

    @brick_utils.trace
    @brick_utils.connect_volume_prepare_result
    def connect_volume(self, connection_properties: dict[str, Any]
                       ) -> dict[str, Any]:
        """Map, cache and return ``{'type': 'block', 'path': ...}``."""
        volume = volume_mod.from_connection_properties(connection_properties)
        with locks.volume_lock(volume.pool, volume.image):
            return self._connect(volume, connection_properties)

    def _connect(self, volume: volume_mod.RBDVolume,
                 props: dict[str, Any]) -> dict[str, Any]:
        rbd_path = self.get_rbd_device_name(volume.pool, volume.image)
        was_mapped = devlinks.resolve(rbd_path) is not None
        device_info = self._local_attach_volume(props)
        if not volume.cacheable:
            LOG.debug('Volume %s is not cacheable; attached through krbd '
                      'only.', volume.label)
            return device_info
        link = devlinks.by_id_link(volume.pool, volume.image)
        link_created = False
        try:
            if devlinks.resolve(rbd_path) is None:
                raise brick_exception.VolumeDeviceNotFound(device=rbd_path)
            caches = self.volume_cache.list_caches()
            in_use = self.volume_cache.casadm.find_core(caches, link)
            link_created = devlinks.ensure_link(link, rbd_path, volume.image,
                                                in_use=in_use is not None)
            cached = self.volume_cache.attach(link, volume.mode,
                                              volume.label, caches=caches)
        except Exception:
            with excutils.save_and_reraise_exception():
                LOG.error('Attaching volume %s failed; undoing what this '
                          'attach did.', volume.label)
                self._rollback(volume, props, device_info, was_mapped,
                               link if link_created else None)
        if cached is None:
            return device_info
        result = dict(device_info)
        result.update(type='block', path=cached.path,
                      cache_mode=cached.mode.value)
        return result

    def _map_for_flush(self, volume: volume_mod.RBDVolume,
                       props: dict[str, Any]) -> dict[str, Any]:
        """krbd-map *volume* and link it where its inactive core expects."""
        rbd_path = self.get_rbd_device_name(volume.pool, volume.image)
        device_info = self._local_attach_volume(props)
        if devlinks.resolve(rbd_path) is None:
            raise brick_exception.VolumeDeviceNotFound(device=rbd_path)
        devlinks.ensure_link(devlinks.by_id_link(volume.pool, volume.image),
                             rbd_path, volume.image, in_use=True)
        return device_info

    def _rollback(self, volume: volume_mod.RBDVolume, props: dict[str, Any],
                  device_info: dict[str, Any], was_mapped: bool,
                  created_link: Optional[str]) -> None:
        """Undo the steps of a failed attach; log, never raise."""
        if created_link:
            try:
                devlinks.remove_link(created_link)
            except Exception:
                LOG.exception('Rollback: could not remove %s', created_link)
        if not was_mapped:
            try:
                self._unmap(props, device_info)
            except Exception:
                LOG.exception('Rollback: could not unmap volume %s',
                              volume.label)

    def _unmap(self, props: dict[str, Any],
               device_info: Optional[dict[str, Any]]) -> bool:
        """krbd-unmap the volume as os-brick's RBDConnector does."""
        conf = device_info.get('conf') if device_info else None
        root_device = self._find_root_device(props, conf)
        if not root_device:
            return False
        self._execute('rbd', 'unmap', root_device,
                      *self._get_rbd_args(props, conf),
                      root_helper=self._root_helper, run_as_root=True)
        return True

    @brick_utils.trace
    @brick_utils.connect_volume_undo_prepare_result(unlink_after=True)
    def disconnect_volume(self, connection_properties: dict[str, Any],
                          device_info: Optional[dict[str, Any]],
                          force: bool = False,
                          ignore_errors: bool = False) -> None:
        """Flush (when needed), remove the core and unmap.

        ``force`` and ``ignore_errors`` never apply to dirty data: a failed
        or timed-out flush raises and leaves core and mapping in place.
        """
        volume = volume_mod.from_connection_properties(connection_properties)
        with locks.volume_lock(volume.pool, volume.image):
            link = devlinks.by_id_link(volume.pool, volume.image)
            try:
                removed = self.volume_cache.detach(link, volume.label)
            except exception.InactiveCoreDeviceMissing as stranded:
                # e.g. after a host reboot: map the volume so the core can
                # be re-activated and its dirty data flushed to Ceph
                LOG.info('Volume %s has dirty data in an inactive Open CAS '
                         'core; mapping it to flush that data before the '
                         'detach.', volume.label)
                try:
                    device_info = self._map_for_flush(volume,
                                                      connection_properties)
                except Exception as exc:
                    LOG.error('Could not map volume %(vol)s to flush its '
                              'inactive core: %(err)s', {
                                  'vol': volume.label, 'err': exc})
                    raise stranded from exc
                removed = self.volume_cache.detach(link, volume.label)
            unmapped = self._unmap(connection_properties, device_info)
            devlinks.remove_link(link)
            if not (removed or unmapped):
                LOG.info('Volume %s was already detached from this host.',
                         volume.label)

    def get_volume_paths(self, connection_properties: dict[str, Any]
                         ) -> list[str]:
        """The /dev/casX-Y of the volume if it is cached here, else []."""
        volume = volume_mod.from_connection_properties(connection_properties)
        link = devlinks.by_id_link(volume.pool, volume.image)
        core = self.volume_cache.casadm.find_core(
            self.volume_cache.list_caches(), link)
        return [core.exported] if core and core.exported else []

    def extend_volume(self, connection_properties: dict[str, Any]) -> int:
        """Refuse: an Open CAS core cannot change size while attached."""
        volume = volume_mod.from_connection_properties(connection_properties)
        raise exception.CasError(
            message='Volume %s is cached by Open CAS; a core cannot be '
                    'resized while attached (the next cache load would '
                    'fail). Detach the volume, extend it, attach it again.'
                    % volume.label)
