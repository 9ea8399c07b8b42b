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

"""What casadm prints, as typed records: CSV parsers and device names.

Pure facts about Open CAS's command-line tool, read with the csv module:
``-L`` (instances and cores), the core pool, ``-P`` statistics, the
IO-class table and its usage, and the ``/dev/casX-Y`` name of an exported
core. :mod:`os_brick_cas.casadm` runs casadm and hands its output here;
the host simulator's output is held to the same parsers.
"""

import csv
import dataclasses
import io
import os
import re
from typing import Optional

from os_brick_cas import exception
from os_brick_cas import labels

LIST_HEADER = ['type', 'id', 'disk', 'status', 'write policy', 'device']
NO_CACHES = 'No caches running'
DIRTY_BLOCKS = 'Dirty [4KiB Blocks]'


@dataclasses.dataclass(frozen=True)
class Core:
    """One core of a cache instance as ``casadm -L -b`` shows it."""

    cache_id: int
    core_id: int
    device: str
    status: str
    exported: Optional[str]

    @property
    def active(self) -> bool:
        return self.status != 'Inactive'

    @property
    def label(self) -> str:
        """``core 3 of cache instance 1`` (:func:`labels.core`)."""
        return labels.core(self.cache_id, self.core_id)


@dataclasses.dataclass(frozen=True)
class CacheInstance:
    """One cache instance with its cores."""

    cache_id: int
    device: str
    status: str
    mode: str
    cores: tuple[Core, ...] = ()

    @property
    def current_mode(self) -> str:
        """The mode now in force: 'wb->wt' (any flush running) is 'wt'."""
        return self.mode.rsplit('->', 1)[-1]

    def find_core(self, device: str) -> Optional[Core]:
        for core in self.cores:
            if core.device == device:
                return core
        return None


def parse_list(text: str) -> list[CacheInstance]:
    """Parse ``casadm -L -o csv`` output into cache instances."""
    if text.strip() == NO_CACHES:
        return []
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [c.strip() for c in rows[0]] != LIST_HEADER:
        raise exception.CasadmCommandFailed(
            operation='--list-caches', exit_code=0,
            detail='unexpected output %r' % text[:200])
    caches: list[CacheInstance] = []
    cores: list[Core] = []
    current: Optional[tuple[int, str, str, str]] = None

    def close() -> None:
        if current is not None:
            caches.append(CacheInstance(*current, cores=tuple(cores)))

    for row in rows[1:]:
        if not row:
            continue
        kind, ident, disk, status, policy, device = (row + [''] * 6)[:6]
        if kind == 'cache':
            close()
            cores = []
            current = (int(ident), disk, status, policy)
        elif kind == 'core' and current is not None and ident != '-':
            cores.append(Core(cache_id=current[0], core_id=int(ident),
                              device=disk, status=status,
                              exported=None if device == '-' else device))
        # 'core pool' rows and detached pool devices are not ours to manage
    close()
    return caches


def parse_core_pool(text: str) -> list[str]:
    """Devices in Open CAS's core pool (``core,-,<device>,Detached``).

    A try-add for a cache that is not running parks its device there, held
    open, so a later ``--add-core`` of it fails until --remove-detached.
    """
    if text.strip() == NO_CACHES:
        return []
    return [row[2] for row in csv.reader(io.StringIO(text))
            if len(row) >= 4 and row[0] == 'core' and row[1] == '-']


def parse_stats(text: str) -> dict[str, str]:
    """Parse ``casadm -P -o csv`` (header line + one value line) by name."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1:
        raise exception.CasadmCommandFailed(
            operation='--stats', exit_code=0,
            detail='expected one line of values, got %r' % text[:200])
    return {key.strip(): (value or '').strip() for key, value in
            rows[0].items()}


@dataclasses.dataclass(frozen=True)
class IoClass:
    """One row of an instance's IO-class table (``-C -L -o csv``)."""

    class_id: int
    name: str
    priority: Optional[int]     # None: pinned
    allocation: float           # 0..1; 0 = the class never maps lines


def parse_io_classes(text: str) -> list[IoClass]:
    """Parse ``casadm --io-class --list -o csv``."""
    table = []
    for row in csv.DictReader(io.StringIO(text)):
        row = {key.strip(): (value or '').strip()
               for key, value in row.items()}
        try:
            table.append(IoClass(
                class_id=int(row['IO class id']),
                name=row['IO class name'],
                priority=(int(row['Eviction priority'])
                          if row['Eviction priority'] else None),
                allocation=float(row['Allocation'])))
        except (KeyError, ValueError):
            raise exception.CasadmCommandFailed(
                operation='--io-class --list', exit_code=0,
                detail='unexpected output %r' % text[:200])
    return table


@dataclasses.dataclass(frozen=True)
class IoClassUsage:
    """One IO class's use of its instance (``-P -i I -d -o csv``).

    Counts are casadm's 4 KiB blocks, summed over the instance's cores.
    Open CAS reports no eviction count per class; reads over a class's cap
    go pass-through and count as *pass_through_reads*.
    """

    class_id: int
    name: str
    #: the class's cap in whole percent ("Max size")
    max_percent: Optional[int]
    occupancy_blocks: int
    dirty_blocks: int
    pass_through_reads: Optional[int] = None


def _count(row: dict[str, str], title: str) -> Optional[int]:
    """A whole number cell (``25%`` counts as 25), None if absent."""
    raw = row.get(title, '').rstrip('%')
    try:
        return int(float(raw))
    except ValueError:
        return None


def parse_io_class_stats(text: str) -> list[IoClassUsage]:
    """Parse ``casadm -P -i I -d -o csv``: one header, a line per class.

    Columns are read by name (they differ between releases).
    """
    usage = []
    for row in csv.DictReader(io.StringIO(text)):
        row = {key.strip(): (value or '').strip()
               for key, value in row.items() if key is not None}
        try:
            usage.append(IoClassUsage(
                class_id=int(row['IO class ID']),
                name=row['IO class name'],
                max_percent=_count(row, 'Max size'),
                occupancy_blocks=int(float(row['Occupancy [4KiB Blocks]'])),
                dirty_blocks=int(float(row[DIRTY_BLOCKS])),
                pass_through_reads=_count(
                    row, 'Pass-Through reads [Requests]')))
        except (KeyError, ValueError):
            raise exception.CasadmCommandFailed(
                operation='--stats --io-class-id', exit_code=0,
                detail='unexpected output %r' % text[:200])
    return usage


def exported_path(cache_id: int, core_id: int) -> str:
    """The cached block device Open CAS exports for a core."""
    return '/dev/cas%d-%d' % (cache_id, core_id)


_EXPORTED = re.compile(r'/dev/cas(?P<cache>\d+)-(?P<core>\d+)')


def core_of_exported(path: str) -> Optional[tuple[int, int]]:
    """(cache id, core id) if *path* (or its target) is an exported core."""
    for candidate in (path, os.path.realpath(path)):
        match = _EXPORTED.fullmatch(candidate)
        if match:
            return int(match.group('cache')), int(match.group('core'))
    return None
