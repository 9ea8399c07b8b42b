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

"""Is the device behind a link really the image it should be?

casadm's try-add checks only a path string and a size, and krbd reuses
device numbers, so a link can end up naming another image's device. Every
step that writes through a device (add core, try-add, flush, remove,
unmap) first asks krbd's sysfs (pool, pool_ns, name, snap, cluster_fsid)
through :func:`verify_device` or :func:`verify_link`.
"""

import os
from typing import Optional

from oslo_config import cfg

from os_brick_cas import exception
from os_brick_cas import opts
from os_brick_cas import rbd_names

CONF = cfg.CONF
ImageSpec = rbd_names.ImageSpec


def sysfs_root() -> str:
    return CONF[opts.GROUP].sysfs_rbd_root


def mapped(device: str) -> Optional[rbd_names.MappedDevice]:
    """krbd's description of *device* (any path resolving to /dev/rbdN)."""
    dev_id = rbd_names.device_id(os.path.realpath(device))
    if dev_id is None:
        return None
    return rbd_names.read_sysfs(dev_id, sysfs_root())


def find_mapping(spec: ImageSpec) -> Optional[str]:
    """/dev/rbdN krbd maps *spec*'s image to (never a snapshot), or None.

    Pool, namespace and image must all match (os-brick's showmapped lookup
    matches the image name only); read from sysfs, no process, no root.
    """
    try:
        entries = os.listdir(sysfs_root())
    except FileNotFoundError:
        return None
    for entry in sorted(entries, key=lambda e: (len(e), e)):
        if not entry.isdigit():
            continue
        found = rbd_names.read_sysfs(int(entry), sysfs_root())
        if (found is not None and not found.is_snapshot and
                spec.same_image(found.spec)):
            return '/dev/rbd%d' % found.dev_id
    return None


def verify_device(device: str, expected: ImageSpec,
                  action: str) -> rbd_names.MappedDevice:
    """The sysfs facts of *device*; raise unless it is *expected*'s image.

    The returned spec carries the cluster fsid krbd reports.
    """
    real = os.path.realpath(device)
    if not os.path.exists(real):
        reason = 'it does not exist'
    elif rbd_names.device_id(real) is None:
        reason = 'it resolves to %s, which is not a krbd device' % real
    else:
        found = mapped(real)
        if found is None:
            reason = 'krbd does not describe %s (not mapped)' % real
        elif found.is_snapshot:
            reason = '%s is snapshot %s of %s' % (real, found.snap,
                                                  found.spec.label)
        elif not expected.same_image(found.spec):
            reason = '%s is RBD image %s' % (real, found.spec.label)
        else:
            return found
    raise exception.ImageIdentityMismatch(
        action=action, path=device, expected=expected.label, reason=reason)


def spec_of_link(link: str, expected: Optional[ImageSpec] = None
                 ) -> ImageSpec:
    """The image *link*'s name binds it to (checked against *expected*).

    A 1.x ``rbd-<pool>-<image>`` name binds nothing by itself: it needs
    *expected*, and must be that image's legacy name.
    """
    name = os.path.basename(link)
    named = rbd_names.parse_link_name(name)
    if named is not None:
        if expected is not None and not named.same_image(expected):
            raise exception.ImageIdentityMismatch(
                action='use %s' % link, path=link,
                expected=expected.label,
                reason='its name belongs to RBD image %s' % named.label)
        return named
    if expected is not None and name == expected.legacy_link_name():
        return expected
    raise exception.ImageIdentityMismatch(
        action='use %s' % link, path=link,
        expected=expected.label if expected else '(unknown)',
        reason='its name does not identify that image')


def verify_link(link: str, action: str,
                expected: Optional[ImageSpec] = None
                ) -> rbd_names.MappedDevice:
    """Check that the device behind by-id *link* is the image it names."""
    return verify_device(link, spec_of_link(link, expected), action)
