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

"""Which processes hold a device open, read from the process table.

For the operator: a core whose ``/dev/casX-Y`` is still open cannot be
removed (casadm refuses with "Device opens or mount are pending"), and a
QEMU that never finished a hot-unplug is the usual holder. Only root sees
every process; others see their own. A QEMU started by libvirt carries
the instance's uuid (``-uuid``), which is shown when present.
(:mod:`os_brick_cas.metrics.qemu` names instances for the exporter with
stricter rules: there a label must not be forgeable.)
"""

import dataclasses
import os
import stat
from typing import Iterable, Optional


@dataclasses.dataclass(frozen=True)
class Opener:
    pid: int
    command: str
    #: libvirt's ``-uuid`` argument (nova's instance uuid), if any
    instance: Optional[str] = None

    def __str__(self) -> str:
        text = '%s (pid %d)' % (self.command, self.pid)
        if self.instance:
            text += ' of instance %s' % self.instance
        return text


def _same_device(a: os.stat_result, b: os.stat_result) -> bool:
    if stat.S_ISBLK(a.st_mode) and stat.S_ISBLK(b.st_mode):
        return a.st_rdev == b.st_rdev
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _describe(proc: str, pid: int) -> Opener:
    with open(os.path.join(proc, 'comm')) as comm:
        command = comm.read().strip()
    with open(os.path.join(proc, 'cmdline'), 'rb') as cmdline:
        argv = cmdline.read().decode('utf-8', 'replace').split('\0')
    instance = next((value for flag, value in zip(argv, argv[1:])
                     if flag == '-uuid'), None)
    return Opener(pid=pid, command=command, instance=instance)


def openers(devices: Iterable[str], proc_root: str = '/proc'
            ) -> dict[str, list[Opener]]:
    """``{device: [Opener, ...]}`` for each of *devices* held open.

    A descriptor counts when it is the same device (block device number,
    not only the path). Processes that exit while we look, or that we may
    not inspect, are skipped; devices nobody holds are left out.
    """
    wanted: dict[str, tuple[str, os.stat_result]] = {}
    for device in devices:
        real = os.path.realpath(device)
        try:
            wanted[real] = (device, os.stat(real))
        except OSError:
            continue
    found: dict[str, list[Opener]] = {}
    if not wanted:
        return found
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        proc = os.path.join(proc_root, entry)
        held = set()
        try:
            fd_dir = os.path.join(proc, 'fd')
            for fd in os.listdir(fd_dir):
                fd_path = os.path.join(fd_dir, fd)
                try:
                    target = os.readlink(fd_path)
                    if target in wanted and _same_device(
                            os.stat(fd_path), wanted[target][1]):
                        held.add(wanted[target][0])
                except OSError:
                    continue    # closed meanwhile
            if not held:
                continue
            opener = _describe(proc, int(entry))
        except OSError:
            continue            # gone, or not ours to inspect
        for device in sorted(held):
            found.setdefault(device, []).append(opener)
    return found
