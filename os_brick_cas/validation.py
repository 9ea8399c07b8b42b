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

"""Validation of everything that reaches a privileged call.

Each function returns the value in its canonical type or raises
:class:`os_brick_cas.exception.InvalidInput`; nothing here runs a command.
"""

import os
import re
from typing import Callable, cast

from os_brick_cas import exception
from os_brick_cas import fence_wire
from os_brick_cas import modes
from os_brick_cas import rbd_names

#: Characters no pool, namespace or image name of a cached volume may
#: hold: path and snapshot separators, and control characters (a newline
#: would split an opencas.conf row or a log line).
_RBD_FORBIDDEN = re.compile(r'[/@\x00-\x1f\x7f]')
_DEV_PATH = re.compile(r'/dev/[A-Za-z0-9_.:+@%/-]+')
_RBD_DEVICE = re.compile(r'/dev/rbd[0-9]+')
MAX_CACHE_ID = 16384
MAX_CORE_ID = 4095
BY_ID_DIR = '/dev/disk/by-id'


def cache_id(value: object) -> int:
    """An Open CAS cache instance id (1..16384)."""
    return _bounded_int('cache id', value, 1, MAX_CACHE_ID)


def core_id(value: object) -> int:
    """An Open CAS core id (0..4095)."""
    return _bounded_int('core id', value, 0, MAX_CORE_ID)


def timeout(value: object) -> int:
    """A timeout in whole seconds (1..86400)."""
    return _bounded_int('timeout', value, 1, 86400)


def _bounded_int(what: str, value: object, low: int, high: int) -> int:
    # bool is an int subclass; "True" as an id is always a caller bug.
    if isinstance(value, bool) or not isinstance(value, int):
        raise exception.InvalidInput(what=what, value=value,
                                     reason='must be an integer')
    if not low <= value <= high:
        raise exception.InvalidInput(
            what=what, value=value,
            reason='must be between %d and %d' % (low, high))
    return value


def dev_path(value: object) -> str:
    """An absolute, normalised path under /dev without odd characters."""
    if not isinstance(value, str) or not _DEV_PATH.fullmatch(value):
        raise exception.InvalidInput(
            what='device path', value=value,
            reason='must be an absolute path under /dev made of letters, '
                   'digits and _.:+@%/-')
    if os.path.normpath(value) != value or '..' in value.split('/'):
        raise exception.InvalidInput(what='device path', value=value,
                                     reason='must be normalised (no ..)')
    return value


def by_id_path(value: object) -> str:
    """A device path directly under /dev/disk/by-id/."""
    path = dev_path(value)
    if os.path.dirname(path) != BY_ID_DIR:
        raise exception.InvalidInput(
            what='by-id path', value=value,
            reason='must be a link directly under %s' % BY_ID_DIR)
    return path


#: cache devices casadm takes without a by-id link (cas_lib.c,
#: set_device_path): RAM disks and the like, for CI hosts
_WHITELISTED_CACHE = re.compile(r'/dev/(ram|nullb|drbd)[0-9]+(p[0-9]+)?')


def cache_device(value: object) -> str:
    """A cache device: a /dev/disk/by-id link or a whitelisted RAM disk."""
    path = dev_path(value)
    if _WHITELISTED_CACHE.fullmatch(path):
        return path
    return by_id_path(path)


def rbd_name(what: str, value: object, allow_empty: bool = False) -> str:
    """A Ceph pool, namespace or image name safe to use on the host.

    Any name Ceph allows passes, except those that could make a path
    resolve outside a krbd device or be read as an option: empty (unless
    *allow_empty*, for the default namespace), '.', '..' or any leading
    '.', a leading '-', '/', '@', control characters (newlines included),
    more than 255 bytes.
    """
    if not isinstance(value, str):
        raise exception.InvalidInput(what=what, value=value,
                                     reason='must be a string')
    if value == '' and allow_empty:
        return value
    reason = None
    if not value:
        reason = 'must not be empty'
    elif value.startswith(('.', '-')):
        reason = "must not start with '.' or '-'"
    elif _RBD_FORBIDDEN.search(value):
        reason = "must not contain '/', '@' or control characters"
    elif len(value.encode('utf-8')) > 255:
        reason = 'must be at most 255 bytes'
    if reason:
        raise exception.InvalidInput(what=what, value=value, reason=reason)
    return value


_FSID = re.compile(r'[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                   r'[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}')


def cluster_fsid(value: object) -> str:
    """A Ceph cluster fsid (a UUID), as 32 lower-case hex digits."""
    if not isinstance(value, str) or not _FSID.fullmatch(value):
        raise exception.InvalidInput(what='cluster fsid', value=value,
                                     reason='must be a UUID')
    return rbd_names.normal_fsid(value)


def rbd_device(value: object) -> str:
    """A krbd device node, exactly ``/dev/rbdN``."""
    if not isinstance(value, str) or not _RBD_DEVICE.fullmatch(value):
        raise exception.InvalidInput(what='krbd device', value=value,
                                     reason='must be /dev/rbd<N>')
    return value


def rbd_link(value: object) -> str:
    """A by-id link name os-brick-cas manages for a krbd device.

    ``/dev/disk/by-id/rbd-cas-…`` naming one image (see
    :mod:`os_brick_cas.rbd_names`), or the 1.x ``rbd-<pool>-<image>`` name
    of a core added before an upgrade.
    """
    path = by_id_path(value)
    name = os.path.basename(path)
    if rbd_names.parse_link_name(name) is not None:
        return path
    if (not name.startswith(rbd_names.PREFIX) and
            name.startswith(rbd_names.LEGACY_PREFIX) and
            len(name) > len(rbd_names.LEGACY_PREFIX)):
        return path
    raise exception.InvalidInput(
        what='rbd by-id link', value=value,
        reason='must be /dev/disk/by-id/rbd-cas-<fsid>-<pool>-<namespace>-'
               '<image> (escaped) or a 1.x rbd-<pool>-<image> link')


def cache_mode(value: object) -> modes.CacheMode:
    """A cache mode name (wt, wb, wa, wo, pt)."""
    try:
        return modes.CacheMode(value)
    except ValueError:
        raise exception.InvalidInput(
            what='cache mode', value=value,
            reason='must be one of %s' % ', '.join(modes.ALL_MODES))


def epoch(value: object) -> str:
    """An attachment epoch: a Cinder attachment id (UUID-like)."""
    return _fence_string('attachment epoch', value, fence_wire.is_epoch,
                         'must be 1-64 letters, digits or dashes, not '
                         'starting with a dash')


def fence_host(value: object) -> str:
    """A compute host name as the fence marker holds it (nova's name)."""
    return _fence_string('compute host name', value, fence_wire.is_host,
                         'must be 1-255 letters, digits or _.:@-')


def _fence_string(what: str, value: object,
                  accepts: Callable[[object], bool], reason: str) -> str:
    """*value* if the fence marker's pattern (fence_wire) *accepts* it."""
    if not accepts(value):
        raise exception.InvalidInput(what=what, value=value, reason=reason)
    return cast(str, value)


def io_class_id(value: object) -> int:
    """An Open CAS IO class id (0..32)."""
    return _bounded_int('IO class id', value, 0, 32)


def cache_share(value: object) -> int:
    """A volume's share of its cache instance, in whole percent (1..100)."""
    return _bounded_int('cache share', value, 1, 100)


def io_class_priority(value: object) -> int:
    """An IO class eviction priority (0..255)."""
    return _bounded_int('IO class priority', value, 0, 255)
