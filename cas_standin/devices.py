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

"""The /dev entries a simulated host creates, all recorded for cleanup."""

import os
from typing import Any

BY_ID = '/dev/disk/by-id'


def _record(state: dict[str, Any], path: str) -> None:
    if path not in state['created']:
        state['created'].append(path)


def symlink(state: dict[str, Any], link: str, target: str) -> None:
    """Create *link* -> relative *target* (as udev does), replacing it."""
    os.makedirs(os.path.dirname(link), exist_ok=True)
    for directory in _parents(link):
        _record(state, directory)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)
    _record(state, link)


def _parents(path: str) -> list[str]:
    """Directories under /dev the simulator may have had to create."""
    found = []
    parent = os.path.dirname(path)
    while parent not in ('/dev', '/', BY_ID, '/dev/disk'):
        found.append(parent)
        parent = os.path.dirname(parent)
    return found


def sparse_file(state: dict[str, Any], path: str, size: int) -> None:
    with open(path, 'wb') as device:
        device.truncate(size)
    _record(state, path)


def block_node(state: dict[str, Any], path: str, like: str) -> None:
    """A block special file with the same major:minor as *like*."""
    rdev = os.stat(like).st_rdev
    if os.path.lexists(path):
        os.unlink(path)
    os.mknod(path, 0o660 | 0o060000, rdev)
    _record(state, path)


def remove(state: dict[str, Any], path: str) -> None:
    if os.path.lexists(path) and not os.path.isdir(path):
        os.unlink(path)
    if path in state['created']:
        state['created'].remove(path)


def remove_all(state: dict[str, Any]) -> None:
    """Remove every entry this host created (deepest first)."""
    for path in sorted(state['created'], key=len, reverse=True):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            elif os.path.lexists(path):
                os.unlink(path)
        except OSError:
            pass
    state['created'] = []
