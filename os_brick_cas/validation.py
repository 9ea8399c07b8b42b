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

from os_brick_cas import exception
from os_brick_cas import modes

#: Pool, namespace and image names we accept (Ceph allows more; these are
#: the names Cinder and Nova create, and none can carry a shell or path
#: metacharacter).
_RBD_NAME = re.compile(r'^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,254}$')
_DEV_PATH = re.compile(r'^/dev/[A-Za-z0-9_.:+@/-]+$')
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
    if not isinstance(value, str) or not _DEV_PATH.match(value):
        raise exception.InvalidInput(
            what='device path', value=value,
            reason='must be an absolute path under /dev made of letters, '
                   'digits and _.:+@/-')
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


def rbd_name(what: str, value: object) -> str:
    """A Ceph pool or image name we are willing to pass to tools."""
    if not isinstance(value, str) or not _RBD_NAME.match(value):
        raise exception.InvalidInput(
            what=what, value=value,
            reason='must be 1-255 characters from A-Z a-z 0-9 _ . - and not '
                   'start with -')
    return value


def cache_mode(value: object) -> modes.CacheMode:
    """A cache mode name (wt, wb, wa, wo, pt)."""
    try:
        return modes.CacheMode(value)
    except ValueError:
        raise exception.InvalidInput(
            what='cache mode', value=value,
            reason='must be one of %s' % ', '.join(modes.ALL_MODES))
