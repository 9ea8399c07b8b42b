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

from typing import Any, Optional

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

SET_ACTION = 'os-brick-cas-set-fence'
CLEAR_ACTION = 'os-brick-cas-clear-fence'
ATTRIBUTE = 'os-brick-cas:fence'


class FenceClient(object):
    """Read, set and clear a volume's fence marker."""

    def __init__(self, cinder: Any):
        """*cinder* is a ``cinderclient.v3.client.Client`` (admin)."""
        self.cinder = cinder

    def get(self, volume_id: str) -> Optional[str]:
        """The host named by the marker, or None."""
        volume = self.cinder.volumes.get(volume_id)
        return getattr(volume, ATTRIBUTE, None)

    def set(self, volume_id: str, host: str) -> None:
        """Record that *host* may hold the volume's unflushed writes."""
        self.cinder.volumes._action(SET_ACTION, volume_id, {'host': host})
        LOG.info('Fence marker of volume %(vol)s set to host %(host)s',
                 {'vol': volume_id, 'host': host})

    def clear(self, volume_id: str) -> None:
        """Drop the marker (after a clean detach, or knowingly)."""
        self.cinder.volumes._action(CLEAR_ACTION, volume_id, {})
        LOG.info('Fence marker of volume %s cleared', volume_id)
