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

"""External (inter-process) locks: one per volume, one per cache instance.

There is deliberately no global lock: attaches to different instances, and
the parts of attaches that do not change an instance, run in parallel.
"""

from oslo_concurrency import lockutils
from oslo_config import cfg

from os_brick_cas import opts
from os_brick_cas import rbd_names

CONF = cfg.CONF
_PREFIX = 'os-brick-cas-'


def _lock(name: str):
    return lockutils.lock(name, lock_file_prefix=_PREFIX, external=True,
                          lock_path=CONF[opts.GROUP].lock_path)


def volume_lock(spec: rbd_names.ImageSpec):
    """Serialise attach/detach of one RBD image on this host."""
    return _lock('rbd-' + '-'.join(rbd_names.escape(part) for part in (
        spec.pool, spec.namespace, spec.image)))


def cache_lock(cache_id: int):
    """Serialise casadm changes to one cache instance."""
    return _lock('cache-%d' % cache_id)
