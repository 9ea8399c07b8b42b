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
and every transition live in :mod:`os_brick_cas.lifecycle`, reached
through :mod:`nova_ext.volume_lifecycle` (which the nova driver uses for
drains around live migrations and swaps).
"""

from nova import exception as nova_exception
from nova import utils as nova_utils
from nova.virt.libvirt.volume import net
from nova.virt.libvirt.volume import volume as libvirt_volume
from oslo_log import log as logging

from nova_ext import compat
from nova_ext import volume_lifecycle
from os_brick_cas import connector as cas_connector
from os_brick_cas import exception as cas_exception
from os_brick_cas import volume as cas_volume

LOG = logging.getLogger(__name__)


class VolumeFenced(nova_exception.Invalid):
    msg_fmt = cas_exception.VolumeFencedElsewhere.message


class LibvirtCachedRBDVolumeDriver(libvirt_volume.LibvirtBaseVolumeDriver):
    """Cacheable RBD volumes as Open CAS block disks."""

    def __init__(self, host, connector=None):
        super().__init__(host, is_block_dev=True)
        self.connector = connector or cas_connector.CachedRBDConnector(
            nova_utils.get_root_helper())
        self.net_driver = net.LibvirtNetVolumeDriver(host)
        self.lifecycle = volume_lifecycle.CachedVolumeLifecycle(
            self.connector)

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

    def connect_volume(self, connection_info, instance):
        """Fence the volume to this host, then cache it (see lifecycle)."""
        data = connection_info['data']
        volume = cas_volume.from_connection_properties(data)
        try:
            done = self.lifecycle.attach(connection_info)
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
        done = self.lifecycle.detach(connection_info, force)
        if done.kept:
            LOG.warning('Leaving the cached data of volume %(vol)s on this '
                        'host untouched: %(err)s',
                        {'vol': connection_info['data'].get('volume_id'),
                         'err': done.kept}, instance=instance)

    def extend_volume(self, connection_info, instance, requested_size):
        return self.connector.extend_volume(connection_info['data'])
