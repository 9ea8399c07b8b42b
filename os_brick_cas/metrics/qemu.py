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

"""Which instance uses a cached device, read from the process table.

nova gives each libvirt domain the instance's uuid, and libvirt starts
QEMU with ``-uuid <uuid>``. The QEMU process holding ``/dev/casX-Y`` open
therefore names the instance without asking nova or libvirt.
"""

import os
from typing import Iterable, Optional


def _uuid_in(cmdline: list[str]) -> Optional[str]:
    for flag, value in zip(cmdline, cmdline[1:]):
        if flag == '-uuid':
            return value
    return None


def _cmdline(proc: str) -> list[str]:
    with open(os.path.join(proc, 'cmdline'), 'rb') as cmdline:
        return cmdline.read().decode('utf-8', 'replace').split('\0')


def _open_paths(proc: str) -> Iterable[str]:
    fd_dir = os.path.join(proc, 'fd')
    for fd in os.listdir(fd_dir):
        try:
            yield os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed meanwhile


def instances_by_device(devices: Iterable[str],
                        proc_root: str = '/proc') -> dict[str, str]:
    """``{device: instance uuid}`` for the *devices* a QEMU holds open.

    Processes that exit or that we may not inspect while we look are
    skipped; a device no process with ``-uuid`` holds is left out.
    """
    # an fd names the file it opened after symlinks are followed
    wanted = {os.path.realpath(device): device for device in devices}
    found: dict[str, str] = {}
    if not wanted:
        return found
    for pid in os.listdir(proc_root):
        if not pid.isdigit():
            continue
        proc = os.path.join(proc_root, pid)
        try:
            held = wanted.keys() & set(_open_paths(proc))
            uuid = _uuid_in(_cmdline(proc)) if held else None
        except OSError:
            continue
        if uuid:
            found.update({wanted[path]: uuid for path in held})
    return found
