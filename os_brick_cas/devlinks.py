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
from stock udev rules. The shipped rule (etc/udev/rules.d, through
``os-brick-cas-rbd-namer``) creates ``/dev/disk/by-id/rbd-cas-<fsid>-<pool>-
<namespace>-<image>`` (see :mod:`os_brick_cas.rbd_names`); when it is not
installed the connector creates the same link itself.
"""

import os
from typing import Optional

from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas import identity
from os_brick_cas.privileged import devices as priv_devices
from os_brick_cas import rbd_names
from os_brick_cas import validation

LOG = logging.getLogger(__name__)


def by_id_link(spec: rbd_names.ImageSpec) -> str:
    """The by-id path of an RBD image's krbd device (fsid must be known)."""
    name = spec.link_name()
    if name is None:
        raise exception.InvalidInput(
            what='RBD image', value=spec.label,
            reason='its cluster fsid is unknown, so its link cannot be named')
    if len(name) > rbd_names.MAX_NAME:
        raise exception.InvalidInput(
            what='RBD image', value=spec.label,
            reason='its by-id link name would be longer than %d bytes'
                   % rbd_names.MAX_NAME)
    return os.path.join(validation.BY_ID_DIR, name)


def legacy_link(spec: rbd_names.ImageSpec) -> Optional[str]:
    """The 1.x by-id path of the image (cores added before an upgrade)."""
    name = spec.legacy_link_name()
    return os.path.join(validation.BY_ID_DIR, name) if name else None


def resolve(path: str) -> Optional[str]:
    """Real device behind *path*, or None if it does not exist."""
    real = os.path.realpath(path)
    return real if os.path.exists(real) else None


def ensure_link(link: str, device: str, spec: rbd_names.ImageSpec,
                in_use: bool) -> bool:
    """Make *link* point at *device*; return True if this call created it.

    *device* must be the krbd device of *spec* (checked in sysfs). A link
    to another device is stale and replaced, unless an active Open CAS
    core is registered under it (``in_use``): that is refused.
    """
    identity.verify_device(device, spec, 'link %s' % link)
    target = os.path.realpath(device)
    if os.path.islink(link):
        actual = resolve(link)
        if actual == target:
            return False
        if actual is not None and in_use:
            raise exception.DeviceLinkConflict(link=link, actual=actual,
                                               expected=target,
                                               image=spec.label)
        LOG.info('Replacing stale link %(link)s -> %(actual)s with '
                 '%(target)s', {'link': link, 'actual': actual,
                                'target': target})
    priv_devices.link_by_id(link, target)
    LOG.debug('Created %(link)s -> %(target)s', {'link': link,
                                                 'target': target})
    return True


def remove_link(link: str, device: Optional[str] = None) -> None:
    """Remove *link* if it dangles or points at *device* (no-op if gone).

    A link that leads to another live device belongs to that device now
    (krbd reuses numbers) and is left alone.
    """
    if not os.path.islink(link):
        return
    actual = resolve(link)
    if actual is not None and (device is None or
                               actual != os.path.realpath(device)):
        LOG.debug('Keeping %(link)s: it points at %(actual)s now',
                  {'link': link, 'actual': actual})
        return
    priv_devices.unlink_by_id(link)
