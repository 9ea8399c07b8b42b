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

"""Names of krbd devices' /dev/disk/by-id links, and krbd's sysfs facts.

Standard library only: the udev helper (``os-brick-cas-rbd-namer``), the
host simulator and the product share this module, so the link udev makes
and the link the product expects are the same string.

A link names exactly one image of one cluster::

    rbd-cas-<fsid>-<pool>-<namespace>-<image>

``<fsid>`` is the cluster fsid as 32 lower-case hex digits; the other parts
are escaped so that none contains ``-``: every character outside
``[A-Za-z0-9_.+]`` becomes ``%XX`` (its UTF-8 bytes). The default namespace
is empty, so ``rbd-cas-<fsid>-volumes--volume%2D1`` is image ``volume-1``
of pool ``volumes``. A mapped snapshot gets no link.

The name os-brick-cas 1.x used, ``rbd-<pool>-<image>``, is ambiguous (pool
``a-b`` + image ``c`` and pool ``a`` + image ``b-c`` collide); it is only
recognised for cores added before an upgrade.
"""

import dataclasses
import os
import re
import string
import sys
from typing import Optional

PREFIX = 'rbd-cas-'
LEGACY_PREFIX = 'rbd-'
MAX_NAME = 255
SYSFS_RBD_DEVICES = '/sys/bus/rbd/devices'
NO_SNAP = '-'

_SAFE = frozenset(string.ascii_letters + string.digits + '_.+')
_FSID = re.compile(r'[0-9a-f]{32}')
_DEVICE = re.compile(r'/dev/rbd(?P<id>[0-9]+)')


def escape(component: str) -> str:
    """*component* with every character outside [A-Za-z0-9_.+] as %XX."""
    return ''.join(char if char in _SAFE else
                   ''.join('%%%02X' % byte for byte in char.encode('utf-8'))
                   for char in component)


def unescape(text: str) -> Optional[str]:
    """Inverse of :func:`escape`; None if *text* is not in escaped form."""
    raw = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == '%':
            pair = text[index + 1:index + 3]
            if len(pair) != 2 or not all(c in string.hexdigits
                                         for c in pair):
                return None
            raw.append(int(pair, 16))
            index += 3
        elif char in _SAFE:
            raw.append(ord(char))
            index += 1
        else:
            return None
    try:
        value = raw.decode('utf-8')
    except UnicodeDecodeError:
        return None
    return value if escape(value) == text else None


def normal_fsid(fsid: str) -> str:
    """A cluster fsid as 32 lower-case hex digits (dashes dropped)."""
    return fsid.strip().replace('-', '').lower()


@dataclasses.dataclass(frozen=True)
class ImageSpec:
    """One RBD image of one cluster: what a link, a core and a row name."""

    pool: str
    namespace: str
    image: str
    fsid: Optional[str] = None   # normal_fsid() form, None when unknown

    @property
    def path(self) -> str:
        """``pool/namespace/image`` (``pool/image`` in the default one)."""
        return '/'.join(p for p in (self.pool, self.namespace, self.image)
                        if p)

    @property
    def label(self) -> str:
        """The path, and the cluster where it is known."""
        return (self.path if not self.fsid else
                '%s (cluster %s)' % (self.path, self.fsid))

    def same_image(self, other: 'ImageSpec') -> bool:
        """Same pool/namespace/image, and same cluster where both know."""
        return ((self.pool, self.namespace, self.image) ==
                (other.pool, other.namespace, other.image) and
                (self.fsid is None or other.fsid is None or
                 self.fsid == other.fsid))

    def link_name(self) -> Optional[str]:
        """The by-id link name, or None while the fsid is unknown."""
        if self.fsid is None:
            return None
        return PREFIX + '-'.join(
            [self.fsid] + [escape(part) for part in
                           (self.pool, self.namespace, self.image)])

    def legacy_link_name(self) -> Optional[str]:
        """The ambiguous 1.x name (only images of the default namespace)."""
        if self.namespace:
            return None
        return '%s%s-%s' % (LEGACY_PREFIX, self.pool, self.image)


def parse_link_name(name: str) -> Optional[ImageSpec]:
    """The image a ``rbd-cas-…`` link names; None for any other name."""
    if not name.startswith(PREFIX) or len(name) > MAX_NAME:
        return None
    parts = name[len(PREFIX):].split('-')
    if len(parts) != 4 or not _FSID.fullmatch(parts[0]):
        return None
    decoded = [unescape(part) for part in parts[1:]]
    if any(part is None for part in decoded):
        return None
    pool, namespace, image = decoded
    if not pool or not image:
        return None
    return ImageSpec(pool=pool, namespace=namespace, image=image,
                     fsid=parts[0])


def device_id(device: str) -> Optional[int]:
    """N of a krbd device path ``/dev/rbdN``; None for anything else."""
    match = _DEVICE.fullmatch(device)
    return int(match.group('id')) if match else None


def _attribute(directory: str, name: str) -> Optional[str]:
    try:
        with open(os.path.join(directory, name)) as attribute:
            return attribute.read().rstrip('\n')
    except FileNotFoundError:
        return None


@dataclasses.dataclass(frozen=True)
class MappedDevice:
    """What krbd publishes under /sys/bus/rbd/devices/<id>/."""

    dev_id: int
    spec: ImageSpec
    snap: str
    image_id: Optional[str]

    @property
    def is_snapshot(self) -> bool:
        return self.snap != NO_SNAP


def read_sysfs(dev_id: int, root: str = SYSFS_RBD_DEVICES
               ) -> Optional[MappedDevice]:
    """krbd's facts of device *dev_id*, or None if it is not mapped."""
    directory = os.path.join(root, str(dev_id))
    pool = _attribute(directory, 'pool')
    image = _attribute(directory, 'name')
    if pool is None or image is None:
        return None
    fsid = _attribute(directory, 'cluster_fsid')
    return MappedDevice(
        dev_id=dev_id,
        spec=ImageSpec(pool=pool,
                       namespace=_attribute(directory, 'pool_ns') or '',
                       image=image,
                       fsid=normal_fsid(fsid) if fsid else None),
        snap=_attribute(directory, 'current_snap') or
        _attribute(directory, 'snap') or NO_SNAP,
        image_id=_attribute(directory, 'image_id'))


def udev_link_name(dev_id: int, root: str = SYSFS_RBD_DEVICES
                   ) -> Optional[str]:
    """The link udev should make for krbd device *dev_id* (None: none)."""
    mapped = read_sysfs(dev_id, root)
    if mapped is None or mapped.is_snapshot:
        return None
    name = mapped.spec.link_name()
    return name if name and len(name) <= MAX_NAME else None


def namer_main(argv: Optional[list[str]] = None) -> int:
    """``os-brick-cas-rbd-namer N``: print the by-id name for /dev/rbdN.

    Called by the udev rule (PROGRAM, %n); prints nothing for snapshots
    and for devices krbd does not describe, so udev makes no link.
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        sys.stderr.write('usage: os-brick-cas-rbd-namer <rbd device id>\n')
        return 2
    name = udev_link_name(int(args[0]))
    if name:
        sys.stdout.write(name + '\n')
    return 0 if name else 1


if __name__ == '__main__':
    sys.exit(namer_main())
