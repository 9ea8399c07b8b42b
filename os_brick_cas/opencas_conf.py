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

"""Reading and rewriting /etc/opencas/opencas.conf.

Open CAS loads caches and cores listed there at boot; casadm never edits it.
Cores of write-back/write-only instances must be listed with
``lazy_startup=true`` while attached: unlisted, a reboot forgets where their
dirty data belongs; listed without it, boot waits for a krbd device that only
returns on re-attach and ends in emergency mode.

Only the ``[cores]`` rows this suite owns are ever changed; every other line
is kept byte for byte.
"""

import dataclasses
import os
import tempfile
from typing import Optional

LAZY_STARTUP = 'lazy_startup=true'


@dataclasses.dataclass(frozen=True)
class CoreRow:
    cache_id: int
    core_id: int
    device: str

    def render(self) -> str:
        return '%d\t%d\t%s\t%s' % (self.cache_id, self.core_id, self.device,
                                   LAZY_STARTUP)


@dataclasses.dataclass(frozen=True)
class OpenCasConf:
    """What the suite needs to know of the file."""

    caches: dict[int, str]          # cache id -> mode as written (WB, WT..)
    cores: dict[tuple[int, int], str]  # (cache id, core id) -> device

    def lists_cache(self, cache_id: int) -> bool:
        return cache_id in self.caches

    def lists_core(self, cache_id: int, core_id: int,
                   device: Optional[str] = None) -> bool:
        found = self.cores.get((cache_id, core_id))
        return found is not None and (device is None or found == device)


def _section(line: str) -> Optional[str]:
    stripped = line.strip()
    if stripped.startswith('[') and stripped.endswith(']'):
        return stripped[1:-1].strip().lower()
    return None


def _fields(line: str) -> list[str]:
    stripped = line.strip()
    if not stripped or stripped.startswith('#'):
        return []
    return stripped.split()


def parse(text: str) -> OpenCasConf:
    """Parse the text of an opencas.conf."""
    caches: dict[int, str] = {}
    cores: dict[tuple[int, int], str] = {}
    section = None
    for line in text.splitlines():
        name = _section(line)
        if name is not None:
            section = name
            continue
        fields = _fields(line)
        try:
            if section == 'caches' and len(fields) >= 3:
                caches[int(fields[0])] = fields[2]
            elif section == 'cores' and len(fields) >= 3:
                cores[(int(fields[0]), int(fields[1]))] = fields[2]
        except ValueError:
            continue
    return OpenCasConf(caches=caches, cores=cores)


def read(path: str) -> OpenCasConf:
    """Parse *path*; a missing file lists nothing."""
    try:
        with open(path) as conf_file:
            return parse(conf_file.read())
    except FileNotFoundError:
        return OpenCasConf(caches={}, cores={})


def rewrite(text: str, add: Optional[CoreRow] = None,
            remove: Optional[tuple[int, int]] = None) -> str:
    """Return *text* with one core row added/replaced and/or removed."""
    drop = {key for key in (remove, add and (add.cache_id, add.core_id))
            if key}
    out: list[str] = []
    section = None
    cores_end = None
    for line in text.splitlines():
        name = _section(line)
        if name is not None:
            section = name
            out.append(line)
            if name == 'cores':
                cores_end = len(out)
            continue
        fields = _fields(line)
        if section == 'cores' and len(fields) >= 2:
            try:
                key = (int(fields[0]), int(fields[1]))
            except ValueError:
                key = None
            if key in drop:
                continue
        out.append(line)
        if section == 'cores' and fields:
            cores_end = len(out)
    if add is not None:
        if cores_end is None:
            out.append('[cores]')
            cores_end = len(out)
        out.insert(cores_end, add.render())
    return '\n'.join(out) + '\n'


def update_file(path: str, add: Optional[CoreRow] = None,
                remove: Optional[tuple[int, int]] = None) -> None:
    """Rewrite *path* atomically with :func:`rewrite`; keeps its mode."""
    try:
        with open(path) as conf_file:
            text = conf_file.read()
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        if add is None:
            return
        text, mode = '', 0o644
    new_text = rewrite(text, add=add, remove=remove)
    if new_text == text:
        return
    directory = os.path.dirname(path) or '.'
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix='.opencas.conf.')
    try:
        with os.fdopen(fd, 'w') as new_file:
            new_file.write(new_text)
            new_file.flush()
            os.fsync(new_file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
