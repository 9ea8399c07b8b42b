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
is kept byte for byte. Open CAS's own parser (``utils/opencas.py``) rejects
the whole file - so no cache loads at boot - when the first line is not
``version=``, a core row names a cache not under ``[caches]`` or one device
is listed twice; a rewrite that would produce such a file is refused.
"""

import dataclasses
import os
import tempfile
from typing import Iterator, Optional

from os_brick_cas import exception
from os_brick_cas import labels

LAZY_STARTUP = 'lazy_startup=true'
TEMP_PREFIX = '.opencas.conf.'


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

    def rows_of_stopped_caches(self, running: Optional[set[int]]
                               ) -> list[tuple[int, int, str]]:
        """(cache, core, device) rows whose cache is not in *running*.

        Such a cache may hold the core's newest data (it reloads the core
        when it starts). *running* None means Open CAS is not usable at
        all: every row counts.
        """
        return [(cache_id, core_id, device)
                for (cache_id, core_id), device in sorted(self.cores.items())
                if running is None or cache_id not in running]


def _content(line: str) -> str:
    """The line as casctl sees it: comment cut off, right side stripped."""
    return line.split('#')[0].rstrip()


def _section(line: str) -> Optional[str]:
    content = _content(line)
    if content in ('[caches]', '[cores]'):
        return content[1:-1]
    return None


def _fields(line: str) -> list[str]:
    return _content(line).split()


Walked = Iterator[tuple[Optional[str], str, list[str]]]


def _walk(lines: list[str]) -> Walked:
    """(section the line is in, the line, its fields) for every line.

    A section header yields its own name and no fields.
    """
    section = None
    for line in lines:
        name = _section(line)
        if name is not None:
            section = name
            yield section, line, []
        else:
            yield section, line, _fields(line)


def _cache_row_id(section: Optional[str], fields: list[str]) -> Optional[int]:
    if section == 'caches' and len(fields) >= 3 and fields[0].isdigit():
        return int(fields[0])
    return None


def parse(text: str) -> OpenCasConf:
    """Parse the text of an opencas.conf."""
    caches: dict[int, str] = {}
    cores: dict[tuple[int, int], str] = {}
    for section, _, fields in _walk(text.splitlines()):
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


def _same_device(one: str, other: str) -> bool:
    return os.path.realpath(one) == os.path.realpath(other)


def _check_add(text: str, add: CoreRow, remove: Optional[CoreRow]) -> None:
    """Refuse a row Open CAS's parser would reject the whole file for."""
    if not text.startswith('version='):
        raise exception.OpenCasConfRefused(
            row=add.render(),
            reason="the file's first line is not version=...; fix the file "
                   "by hand (casctl cannot load it as it is)")
    listed = parse(text)
    if not listed.lists_cache(add.cache_id):
        raise exception.OpenCasConfRefused(
            row=add.render(),
            reason='cache instance %d is not listed under [caches]; list it '
                   'there (casctl rejects a core row of an unlisted cache)'
                   % add.cache_id)
    for key, device in listed.cores.items():
        if key == (add.cache_id, add.core_id):
            continue  # replaced: casadm gave this core id to the new device
        if remove is not None and (remove.cache_id, remove.core_id,
                                   remove.device) == key + (device,):
            continue
        if _same_device(device, add.device):
            raise exception.OpenCasConfRefused(
                row=add.render(),
                reason='the device is already listed as %s, which may '
                       'still hold its dirty data; detach it from that '
                       'instance (or remove that row once its data is '
                       'flushed) first' % labels.core(key[0], key[1]))


def rewrite(text: str, add: Optional[CoreRow] = None,
            remove: Optional[CoreRow] = None) -> str:
    """Return *text* with one core row added/replaced and/or removed.

    *remove* drops only a row matching its cache, core and device. *add*
    replaces a row of the same cache and core id; it is refused
    (:class:`~os_brick_cas.exception.OpenCasConfRefused`) where casctl
    would reject the result.
    """
    if add is not None:
        _check_add(text, add, remove)
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
        if section == 'cores' and len(fields) >= 3:
            try:
                key = (int(fields[0]), int(fields[1]))
            except ValueError:
                key = None
            if key is not None:
                if add is not None and key == (add.cache_id, add.core_id):
                    continue
                if remove is not None and (
                        key == (remove.cache_id, remove.core_id) and
                        fields[2] == remove.device):
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


def _pid_of(name: str) -> Optional[int]:
    """The writer pid in a temp file name ``.opencas.conf.<pid>.<random>``."""
    head = name[len(TEMP_PREFIX):].split('.', 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temporaries(directory: str) -> list[str]:
    """Remove temp files of writers that died before their rename.

    Call with the opencas.conf lock held: every writer takes it, so a temp
    file whose writer pid is gone (or that carries no pid: older releases)
    can never be renamed any more. Returns the paths removed.
    """
    removed = []
    for name in os.listdir(directory):
        if not name.startswith(TEMP_PREFIX):
            continue
        pid = _pid_of(name)
        if pid is not None and (pid == os.getpid() or _alive(pid)):
            continue
        path = os.path.join(directory, name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def update_file(path: str, add: Optional[CoreRow] = None,
                remove: Optional[CoreRow] = None) -> None:
    """Rewrite *path* atomically with :func:`rewrite`; keeps its mode.

    A symlinked *path* keeps its link: the file it points to is rewritten.
    The directory is fsynced after the rename so a power cut keeps the row.
    Call with the opencas.conf lock held (temp files of dead writers are
    swept).
    """
    target = os.path.realpath(path)
    current = _read(target)
    if current is None and add is None:
        return
    text, mode = current or ('', 0o644)
    _replace_file(target, text, rewrite(text, add=add, remove=remove), mode)


def _read(target: str) -> Optional[tuple[str, int]]:
    """(text, permission bits) of *target*; None if it does not exist."""
    try:
        with open(target) as conf_file:
            text = conf_file.read()
        return text, os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        return None


def _replace_file(target: str, text: str, new_text: str, mode: int) -> bool:
    """Atomically replace *target* (holding *text*) by *new_text*.

    Returns whether anything changed; the directory is fsynced after the
    rename so a power cut keeps the new content.
    """
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    sweep_temporaries(directory)
    if new_text == text:
        return False
    fd, temporary = tempfile.mkstemp(
        dir=directory, prefix='%s%d.' % (TEMP_PREFIX, os.getpid()))
    try:
        with os.fdopen(fd, 'w') as new_file:
            new_file.write(new_text)
            new_file.flush()
            os.fsync(new_file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    _fsync_directory(directory)
    return True


#: first line of a file os-brick-cas creates (casctl only checks the key)
VERSION_LINE = 'version=19.3.0'


@dataclasses.dataclass(frozen=True)
class CacheRow:
    """A ``[caches]`` row: what casctl starts or loads at boot."""

    cache_id: int
    device: str
    mode: str                           # wt, wb, ...
    extra: tuple[tuple[str, str], ...] = ()

    def render(self) -> str:
        row = '%d\t%s\t%s' % (self.cache_id, self.device, self.mode.upper())
        if self.extra:
            row += '\t' + ','.join('%s=%s' % item for item in self.extra)
        return row


def rewrite_caches(text: str, rows: list[CacheRow]) -> str:
    """Return *text* with *rows* as the ``[caches]`` rows of their ids.

    Rows of other cache ids, every ``[cores]`` row, comments and blank
    lines are kept as they are; new rows go at the end of ``[caches]``.
    Refused (OpenCasConfRefused) where casctl would reject the file: a
    device listed under another cache id.
    """
    wanted = {row.cache_id: row for row in rows}
    for cache_id, device in _cache_devices(text).items():
        for row in rows:
            if cache_id != row.cache_id and _same_device(device, row.device):
                raise exception.OpenCasConfRefused(
                    row=row.render(),
                    reason='%s is already listed as cache instance %d; '
                           'remove that row first (once that instance is '
                           'flushed and stopped)' % (device, cache_id))
    lines = text.splitlines()
    if not lines or not lines[0].startswith('version='):
        lines.insert(0, VERSION_LINE)
    out: list[str] = []
    caches_end = None
    written: set[int] = set()
    for section, line, fields in _walk(lines):
        row = wanted.get(_cache_row_id(section, fields))
        if row is not None:
            if row.cache_id not in written:
                out.append(row.render())
                written.add(row.cache_id)
        else:
            out.append(line)
        if section == 'caches' and (fields or _section(line) == 'caches'):
            caches_end = len(out)
    missing = [row.render() for row in rows if row.cache_id not in written]
    if caches_end is None:
        # [caches] must come before [cores]: put it right after version=
        out[1:1] = ['[caches]'] + missing
    else:
        out[caches_end:caches_end] = missing
    if not any(_section(line) == 'cores' for line in out):
        out.append('[cores]')
    return '\n'.join(out) + '\n'


def _cache_devices(text: str) -> dict[int, str]:
    return {_cache_row_id(section, fields): fields[1]
            for section, _, fields in _walk(text.splitlines())
            if _cache_row_id(section, fields) is not None}


def update_caches_file(path: str, rows: list[CacheRow]) -> bool:
    """Rewrite *path* with :func:`rewrite_caches`; True if it changed.

    Call with the opencas.conf lock held.
    """
    target = os.path.realpath(path)
    text, mode = _read(target) or ('', 0o644)
    return _replace_file(target, text, rewrite_caches(text, rows), mode)


def drop_caches(text: str, cache_ids: list[int]) -> str:
    """Return *text* without the ``[caches]`` and ``[cores]`` rows of ids.

    For cache instances that were flushed and stopped: casctl must not
    start them (or re-attach their cores) at the next boot. Every other
    line is kept as it is.
    """
    dropped = set(cache_ids)
    out = []
    for section, line, fields in _walk(text.splitlines()):
        owner = (int(fields[0]) if section in ('caches', 'cores') and
                 fields and fields[0].isdigit() else None)
        if owner not in dropped:
            out.append(line)
    return '\n'.join(out) + '\n' if out else ''


def forget_caches_file(path: str, cache_ids: list[int]) -> bool:
    """Rewrite *path* with :func:`drop_caches`; True if it changed.

    A missing file is left missing. Call with the opencas.conf lock held.
    """
    target = os.path.realpath(path)
    current = _read(target)
    if current is None:
        return False
    text, mode = current
    return _replace_file(target, text, drop_caches(text, cache_ids), mode)
