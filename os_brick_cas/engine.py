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

"""os-brick cache-engine adapter: lets os_brick.caches.CacheManager use us.

os-brick's own Open CAS engine is unsafe (``casadm -R -f`` drops dirty
data, substring device matching); this engine serves the same
CacheEngineBase interface on top of :class:`os_brick_cas.cache.VolumeCache`.
Register it with :func:`register` and pass ``cache_name='os_brick_cas'``.
"""

import os
from typing import Any, Optional

from os_brick import caches
from os_brick import exception as brick_exception
from oslo_log import log as logging

from os_brick_cas import cache as cache_mod
from os_brick_cas import devlinks
from os_brick_cas import exception
from os_brick_cas import identity
from os_brick_cas import rbd_names
from os_brick_cas import validation
from os_brick_cas import volume as volume_mod

LOG = logging.getLogger(__name__)
ENGINE_NAME = 'os_brick_cas'


def register() -> None:
    """Make ``cache_name='os_brick_cas'`` resolve to this engine."""
    caches.CACHE_ENGINE_TO_CACHE_CLASS_MAP[ENGINE_NAME] = (
        __name__ + '.OpenCasRbdEngine')


class OpenCasRbdEngine(caches.CacheEngineBase):
    """CacheEngineBase over the os-brick-cas cache step.

    ``attach_volume(dev_path=...)`` takes the device os-brick connected
    (``/dev/rbd/<pool>/<image>`` or a /dev/disk/by-id link);
    ``detach_volume(dev_path=...)`` takes the /dev/casX-Y it returned.
    """

    def __init__(self, volume_cache: Optional[cache_mod.VolumeCache] = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.volume_cache = volume_cache or cache_mod.VolumeCache()
        self.mode = validation.cache_mode(
            kwargs.get('cache_mode') or volume_mod.DEFAULT_MODE.value)

    def is_engine_ready(self, **kwargs: Any) -> bool:
        """True if casadm answers and the mode has a usable instance."""
        try:
            self.volume_cache.casadm.version()
            self.volume_cache.policy.place(self.mode,
                                           self.volume_cache.list_caches())
        except exception.CasError as exc:
            LOG.warning('Open CAS engine not ready: %s', exc)
            return False
        return True

    @staticmethod
    def _core_link(dev_path: str
                   ) -> tuple[str, Optional[rbd_names.ImageSpec]]:
        """The by-id link for *dev_path*, and the image krbd says it is.

        The spec is None when *dev_path* already is a by-id link.
        """
        dev_path = validation.dev_path(dev_path)
        if os.path.dirname(dev_path) == validation.BY_ID_DIR:
            return dev_path, None
        parts = dev_path.split('/')
        mapped = identity.mapped(dev_path)
        if parts[:3] == ['', 'dev', 'rbd'] and mapped is not None and (
                not mapped.is_snapshot):
            return devlinks.by_id_link(mapped.spec), mapped.spec
        raise exception.InvalidInput(
            what='device path', value=dev_path,
            reason='the Open CAS engine needs a mapped krbd image '
                   '(/dev/rbd/<pool>/<image>) or a /dev/disk/by-id link; '
                   'casadm refuses other paths')

    def attach_volume(self, **kwargs: Any) -> str:
        """Cache ``dev_path``; return the exported device (or dev_path)."""
        dev_path = kwargs['dev_path']
        link, spec = self._core_link(dev_path)
        caches_now = self.volume_cache.list_caches()
        if spec is not None:
            in_use = self.volume_cache.casadm.find_core(caches_now, link)
            devlinks.ensure_link(link, dev_path, spec,
                                 in_use=in_use is not None)
        cached = self.volume_cache.attach(link, self.mode, dev_path,
                                          caches=caches_now, spec=spec)
        return cached.path if cached else dev_path

    def detach_volume(self, **kwargs: Any) -> str:
        """Un-cache the /dev/casX-Y in ``dev_path``; return the core path."""
        dev_path = validation.dev_path(kwargs['dev_path'])
        for cache in self.volume_cache.list_caches():
            for core in cache.cores:
                if core.exported == dev_path or core.device == dev_path:
                    self.volume_cache.detach(core.device, dev_path)
                    return core.device
        raise brick_exception.VolumeDeviceNotFound(device=dev_path)
