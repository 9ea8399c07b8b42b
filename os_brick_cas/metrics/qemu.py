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

Any user can start a process whose command line says ``-uuid``, and in a
mount namespace of its own any file can be at ``/dev/casX-Y``. So only a
process that runs as the QEMU user (``[os_brick_cas_exporter]
qemu_user``), shares the host's mount namespace (that of pid 1, or the
exporter's own) and holds the very device (same block device number, not
only the same path) may name the instance.
"""

import os
import pwd
import stat
from typing import Iterable, Optional


def _uuid_in(cmdline: list[str]) -> Optional[str]:
    for flag, value in zip(cmdline, cmdline[1:]):
        if flag == '-uuid':
            return value
    return None


def _cmdline(proc: str) -> list[str]:
    with open(os.path.join(proc, 'cmdline'), 'rb') as cmdline:
        return cmdline.read().decode('utf-8', 'replace').split('\0')


def _uids(proc: str) -> set[int]:
    """The real, effective, saved and filesystem uids of a process."""
    with open(os.path.join(proc, 'status'), 'rb') as status:
        for line in status:
            if line.startswith(b'Uid:'):
                return {int(uid) for uid in line.split()[1:]}
    return set()


def _mount_ns(proc: str) -> str:
    return os.readlink(os.path.join(proc, 'ns', 'mnt'))


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    if stat.S_ISBLK(a.st_mode) and stat.S_ISBLK(b.st_mode):
        return a.st_rdev == b.st_rdev
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _held(proc: str, wanted: dict[str, os.stat_result]) -> set[str]:
    """The *wanted* paths this process holds open, checked by identity."""
    fd_dir = os.path.join(proc, 'fd')
    held = set()
    for fd in os.listdir(fd_dir):
        fd_path = os.path.join(fd_dir, fd)
        try:
            path = os.readlink(fd_path)
            if path in wanted and _same_file(os.stat(fd_path), wanted[path]):
                held.add(path)
        except OSError:
            continue  # closed meanwhile
    return held


def _host_namespaces(proc_root: str) -> set[str]:
    found = set()
    for pid in ('1', 'self'):
        try:
            found.add(_mount_ns(os.path.join(proc_root, pid)))
        except OSError:
            continue
    return found


def _qemu_uid(user: str) -> Optional[int]:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def instances_by_device(devices: Iterable[str], proc_root: str = '/proc',
                        qemu_user: str = 'libvirt-qemu') -> dict[str, str]:
    """``{device: instance uuid}`` for the *devices* a QEMU holds open.

    Only processes of *qemu_user* in the host's mount namespace count;
    processes that exit or that we may not inspect while we look are
    skipped; a device no such process holds is left out.
    """
    uid = _qemu_uid(qemu_user)
    wanted: dict[str, os.stat_result] = {}
    paths: dict[str, str] = {}
    for device in devices:
        real = os.path.realpath(device)   # an fd names the file it opened
        try:
            wanted[real] = os.stat(real)
        except OSError:
            continue
        paths[real] = device
    found: dict[str, str] = {}
    namespaces = _host_namespaces(proc_root)
    if not wanted or uid is None or not namespaces:
        return found
    for pid in os.listdir(proc_root):
        if not pid.isdigit():
            continue
        proc = os.path.join(proc_root, pid)
        try:
            if _uids(proc) != {uid} or _mount_ns(proc) not in namespaces:
                continue
            held = _held(proc, wanted)
            uuid = _uuid_in(_cmdline(proc)) if held else None
        except (OSError, ValueError):
            continue
        if uuid:
            found.update({paths[path]: uuid for path in held})
    return found
