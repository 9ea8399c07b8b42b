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

"""RBD driver extension: cache modes in connection_info, and the guards.

Configure a Ceph backend with::

    volume_driver = cinder_ext.rbd.CachedRBDDriver

Everything else is cinder's own RBD driver. Volumes of a type with
``cacheable='<is> True'`` get ``cacheable`` and ``cache_mode`` (and
``cache_share`` when the type sets ``cas:cache_share``) in their
connection_info (with the cluster's fsid, so the compute host can tell
images of two clusters apart); the backend reports ``cacheable: True`` so
the scheduler can place such volumes on it; other volumes are untouched.
"""

from typing import Any

from cinder import objects
from cinder.volume.drivers import rbd
from oslo_log import log as logging

from cinder_ext import guards

LOG = logging.getLogger(__name__)


class CachedRBDDriver(rbd.RBDDriver):
    """Cinder's RBD driver with Open CAS host-cache awareness."""

    def _update_volume_stats(self) -> None:
        super()._update_volume_stats()
        # cacheable='<is> True' is an unscoped extra spec: the capabilities
        # filter only passes backends that report it.
        self._stats['cacheable'] = True

    def initialize_connection(self, volume: Any,
                              connector: dict) -> dict[str, Any]:
        # invalid specs are refused before anything asks Ceph
        spec = guards.cache_spec(volume)
        # in any mode, cached or not: the type may have changed since the
        # fenced host cached the volume's newest writes
        guards.refuse_fenced_connection(volume, connector)
        data = super().initialize_connection(volume, connector)
        if not spec.cacheable:
            return data
        # the host names the krbd device's by-id link after the cluster
        # too and checks it against krbd's sysfs (cluster_fsid)
        data['data'].update(cacheable=True, cache_mode=spec.mode,
                            cluster_fsid=self._get_fsid())
        if spec.share is not None:
            # whole percent of the cache instance (cas:cache_share)
            data['data']['cache_share'] = spec.share
        LOG.debug('Volume %(vol)s connects cached in mode %(mode)s',
                  {'vol': volume.id, 'mode': spec.mode})
        return data

    def create_snapshot(self, snapshot: Any) -> None:
        guards.refuse_if_dirty_capable(snapshot.volume, 'snapshot',
                                       allow_drained=True)
        return super().create_snapshot(snapshot)

    def create_cloned_volume(self, volume: Any, src_vref: Any):
        guards.refuse_if_dirty_capable(src_vref, 'clone')
        return super().create_cloned_volume(volume, src_vref)

    def get_backup_device(self, context: Any, backup: Any):
        volume = objects.Volume.get_by_id(context, backup.volume_id)
        guards.refuse_if_dirty_capable(volume, 'back up',
                                       allow_drained=True)
        return super().get_backup_device(context, backup)

    def retype(self, context: Any, volume: Any, new_type: Any, diff: Any,
               host: Any):
        if guards.changes_only_the_share(volume, new_type):
            # in place, fenced or not: nothing is copied (a refusal here
            # would make cinder migrate, i.e. copy, the volume instead)
            share = guards.type_cache_spec(new_type).share
            LOG.info('Volume %(vol)s: cache share %(share)s from now on; a '
                     'compute host that has it attached applies it at the '
                     'next attach.', {'vol': volume.id, 'share': 'none' if
                                      share is None else '%d%%' % share})
            return super().retype(context, volume, new_type, diff, host)
        guards.refuse_cache_change_while_attached(volume, new_type)
        # when the driver refuses, cinder migrates: a copy of the stale
        # image, as the API's refusal of a fenced volume's retype says
        guards.refuse_if_marked(volume, 'retype')
        return super().retype(context, volume, new_type, diff, host)

    def extend_volume(self, volume: Any, new_size: Any) -> None:
        guards.refuse_attached_extend(volume)
        return super().extend_volume(volume, new_size)
