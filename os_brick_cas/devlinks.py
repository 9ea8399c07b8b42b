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

"""The /dev/disk/by-id link casadm needs for a krbd device.

casadm accepts a core only by a /dev/disk/by-id path; krbd devices get none
from stock udev rules. The shipped rule (etc/udev/rules.d) creates
``/dev/disk/by-id/rbd-<pool>-<image>``; when it is not installed the
connector creates the same link itself.
"""

import os
from typing import Optional

from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas.privileged import devices as priv_devices
from os_brick_cas import validation

LOG = logging.getLogger(__name__)


def by_id_link(pool: str, image: str) -> str:
    """The by-id path of an RBD image's krbd device."""
    return os.path.join(validation.BY_ID_DIR, 'rbd-%s-%s' % (
        validation.rbd_name('pool', pool),
        validation.rbd_name('image', image)))


def resolve(path: str) -> Optional[str]:
    """Real device behind *path*, or None if it does not exist."""
    real = os.path.realpath(path)
    return real if os.path.exists(real) else None


def ensure_link(link: str, device: str, image: str,
                in_use: bool) -> bool:
    """Make *link* point at *device*; return True if this call created it.

    ``in_use`` says whether an Open CAS core is registered under *link*: a
    live link to another device then is a name clash we refuse, while a
    link nobody uses is stale and is replaced.
    """
    target = resolve(device)
    if target is None:
        raise exception.InvalidInput(what='RBD device', value=device,
                                     reason='does not exist')
    if os.path.islink(link):
        actual = resolve(link)
        if actual == target:
            return False
        if actual is not None and in_use:
            raise exception.DeviceLinkConflict(link=link, actual=actual,
                                               expected=target, image=image)
        LOG.info('Replacing stale link %(link)s -> %(actual)s with '
                 '%(target)s', {'link': link, 'actual': actual,
                                'target': target})
    priv_devices.link_by_id(link, target)
    LOG.debug('Created %(link)s -> %(target)s', {'link': link,
                                                 'target': target})
    return True


def remove_link(link: str) -> None:
    """Remove *link* (no-op if it is gone)."""
    if os.path.islink(link):
        priv_devices.unlink_by_id(link)
