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

"""``casadm -P -o csv`` lines for a simulated cache or core.

The columns are those of the emulated release (:mod:`.releases`;
tests/data/real-casadm has v26.03.2's own output); values come from the
simulated state and every column not tracked here is zero.
"""

import time
from typing import Any, Optional

from cas_standin import releases

BLOCKS = '4KiB Blocks'
REQUESTS = 'Requests'

#: counters in casadm's order; "{s}" is "(s)" in cache stats (they sum
#: over the cache's cores) and empty in core stats
_COUNTERS = [
    ('Occupancy', BLOCKS), ('Free', BLOCKS), ('Clean', BLOCKS),
    ('Dirty', BLOCKS),
    ('Read hits', REQUESTS), ('Read deferred', REQUESTS),
    ('Read partial misses', REQUESTS), ('Read full misses', REQUESTS),
    ('Read total', REQUESTS),
    ('Write hits', REQUESTS), ('Write deferred', REQUESTS),
    ('Write partial misses', REQUESTS), ('Write full misses', REQUESTS),
    ('Write total', REQUESTS),
    ('Pass-Through reads', REQUESTS), ('Pass-Through writes', REQUESTS),
    ('Serviced requests', REQUESTS), ('Prefetch: readahead', REQUESTS),
    ('Cleaner', REQUESTS), ('User requests', REQUESTS),
    ('Total requests', REQUESTS),
    ('Reads from core{s}', BLOCKS), ('Writes to core{s}', BLOCKS),
    ('Total to/from core{s}', BLOCKS),
    ('Reads from cache', BLOCKS), ('Writes to cache', BLOCKS),
    ('Total to/from cache', BLOCKS),
    ('Reads from exported object{s}', BLOCKS),
    ('Writes to exported object{s}', BLOCKS),
    ('Total to/from exported object{s}', BLOCKS),
    ('Prefetch core reads: readahead', BLOCKS),
    ('Prefetch cache writes: readahead', BLOCKS),
    ('Cleaner cache reads', BLOCKS), ('Cleaner core writes', BLOCKS),
    ('Cache read errors', REQUESTS), ('Cache write errors', REQUESTS),
    ('Cache total errors', REQUESTS), ('Core read errors', REQUESTS),
    ('Core write errors', REQUESTS), ('Core total errors', REQUESTS),
    ('Total errors', REQUESTS),
]


#: rows only v26.03 and later print (statistics_model.c)
DEFERRED = ('Read deferred', 'Write deferred')
#: columns only open-cas-linux master prints
PREFETCH = ('Prefetch Policy', 'Prefetch: readahead', 'Cleaner',
            'User requests', 'Prefetch core reads: readahead',
            'Prefetch cache writes: readahead', 'Cleaner cache reads',
            'Cleaner core writes')


def _shown(name: str, release: releases.Release) -> bool:
    return ((release.deferred_rows or name not in DEFERRED) and
            (release.prefetch_columns or name not in PREFETCH))


def _counter_columns(plural: str, release: releases.Release) -> list[str]:
    """Each counter as casadm prints it: '<name> [<unit>]', '<name> [%]'."""
    columns = []
    for name, unit in _COUNTERS:
        if not _shown(name, release):
            continue
        name = name.format(s=plural)
        columns += ['%s [%s]' % (name, unit), '%s [%%]' % name]
    return columns


def cache_columns(release: releases.Release) -> list[str]:
    """The header of ``casadm -P -i N -o csv`` in *release*."""
    return [name for name in (
        'Cache Id', 'Cache Size [4KiB Blocks]', 'Cache Size [GiB]',
        'Cache Device', 'Exported Object', 'Core Devices',
        'Inactive Core Devices', 'Write Policy', 'Cleaning Policy',
        'Promotion Policy', 'Prefetch Policy', 'Cache line size [KiB]',
        'Metadata Memory Footprint [MiB]', 'Dirty for [s]', 'Dirty for',
        'Status') if _shown(name, release)] + _counter_columns('(s)', release)


def core_columns(release: releases.Release) -> list[str]:
    """The header of ``casadm -P -i N -j M -o csv`` in *release*."""
    return [
        'Core Id', 'Core Device', 'Exported Object',
        'Core Size [4KiB Blocks]', 'Core Size [GiB]', 'Dirty for [s]',
        'Dirty for', 'Status', 'Seq cutoff threshold [KiB]',
        'Seq cutoff policy',
    ] + _counter_columns('', release)


def dirty_seconds(core: dict[str, Any], now: Optional[float] = None) -> int:
    """Whole seconds a core has held dirty data (OCF's dirty_since)."""
    since = core.get('dirty_since')
    if not core['dirty'] or since is None:
        return 0
    return max(int((now or time.time()) - since), 0)


def dirty_for(seconds: int) -> dict[str, str]:
    """The two "Dirty for" columns (statistics_model.c, print_dirty_for_time).

    0 prints "Cache clean", whatever the dirty count: OCF keeps
    dirty_since in whole seconds, so for the first second of dirty data
    casadm says "Cache clean" while Dirty is above 0.
    """
    if not seconds:
        text = 'Cache clean'
    else:
        parts = zip((seconds // 86400, seconds % 86400 // 3600,
                     seconds % 3600 // 60, seconds % 60), 'dhms')
        text = ' '.join('%d [%s]' % (value, unit) for value, unit in parts
                        if value)
    return {'Dirty for [s]': str(seconds), 'Dirty for': text}


def _pct(part: float, whole: float) -> str:
    return '%.1f' % (100.0 * part / whole if whole else 0.0)


#: request counters a data-true instance adds (0 in the counter-only one)
OPTIONAL = ('read_partial_misses', 'write_partial_misses',
            'pass_through_reads', 'pass_through_writes')


def _request_columns(core_like: dict[str, Any]) -> dict[str, str]:
    read_hits = core_like['read_hits']
    read_total = core_like['read_total']
    write_hits = core_like['write_hits']
    write_total = core_like['write_total']
    read_partial, write_partial, pt_reads, pt_writes = (
        core_like.get(key, 0) for key in OPTIONAL)
    serviced = read_total + write_total
    total = serviced + pt_reads + pt_writes
    values = {
        'Read hits [Requests]': read_hits,
        'Read partial misses [Requests]': read_partial,
        'Read full misses [Requests]': read_total - read_hits - read_partial,
        'Read total [Requests]': read_total,
        'Write hits [Requests]': write_hits,
        'Write partial misses [Requests]': write_partial,
        'Write full misses [Requests]': (write_total - write_hits -
                                         write_partial),
        'Write total [Requests]': write_total,
        'Pass-Through reads [Requests]': pt_reads,
        'Pass-Through writes [Requests]': pt_writes,
        'Serviced requests [Requests]': serviced,
        'User requests [Requests]': total,
        'Total requests [Requests]': total,
    }
    out = {name: str(value) for name, value in values.items()}
    for name, value in values.items():
        out[name.replace('[Requests]', '[%]')] = _pct(value, total)
    return out


def _usage(occupancy: int, dirty: int, size: int, whole: int,
           prefix: str = '') -> dict[str, str]:
    """Usage rows; Clean and Dirty are percent of *whole*.

    casadm: percent of the cache size at cache level, of the occupancy at
    core level and in the "Inactive" rows.
    """
    clean = occupancy - dirty
    free = max(size - occupancy, 0)
    out = {}
    for name, value, of in (('Occupancy', occupancy, size),
                            ('Free', free, size), ('Clean', clean, whole),
                            ('Dirty', dirty, whole)):
        out['%s%s [4KiB Blocks]' % (prefix, name)] = str(value)
        out['%s%s [%%]' % (prefix, name)] = _pct(value, of)
    return out


#: rows a cache with inactive cores adds after its usage rows
INACTIVE_USAGE = ['Inactive %s [%s]' % (name, unit)
                  for name in ('Occupancy', 'Clean', 'Dirty')
                  for unit in ('4KiB Blocks', '%')]


def _line(header: list[str], values: dict[str, str]) -> str:
    def quote(value: str) -> str:
        return '"%s"' % value if ',' in value else value
    return '%s\n%s\n' % (','.join(header), ','.join(
        quote(values.get(name, '0')) for name in header))


def cache_csv(cache_id: int, cache: dict[str, Any],
              release: releases.Release, now: Optional[float] = None) -> str:
    cores = list(cache['cores'].values())
    dirty = sum(c['dirty'] for c in cores)
    occupancy = sum(c['dirty'] + c['clean'] for c in cores)
    totals = {key: sum(c.get(key, 0) for c in cores) for key in
              ('read_hits', 'read_total', 'write_hits', 'write_total') +
              OPTIONAL}
    values = {
        'Cache Id': str(cache_id),
        'Cache Size [4KiB Blocks]': str(cache['size_blocks']),
        'Cache Size [GiB]': '%.2f' % (cache['size_blocks'] * 4096 / 2 ** 30),
        'Cache Device': cache['device'], 'Exported Object': '-',
        'Core Devices': str(len(cores)),
        'Inactive Core Devices': str(sum(
            1 for c in cores if c['status'] == 'Inactive')),
        'Write Policy': cache['mode'],
        'Cleaning Policy': cache.get('params', {}).get(
            'cleaning', {}).get('policy', 'alru'),
        'Promotion Policy': cache.get('params', {}).get(
            'promotion', {}).get('policy', 'always'),
        'Prefetch Policy': 'none',
        'Cache line size [KiB]': str(cache.get('line_size_kib', 4)),
        'Metadata Memory Footprint [MiB]': '145.2',
        'Status': cache['status'],
    }
    values.update(dirty_for(max([dirty_seconds(c, now) for c in cores] or
                                [0])))
    size = cache['size_blocks']
    values.update(_usage(occupancy, dirty, size, size))
    values.update(_request_columns(totals))
    columns = cache_columns(release)
    inactive = [c for c in cores if c['status'] == 'Inactive']
    if inactive:
        held = sum(c['dirty'] + c['clean'] for c in inactive)
        values.update(_usage(held, sum(c['dirty'] for c in inactive), size,
                             held, 'Inactive '))
        at = columns.index('Dirty [%]') + 1
        columns[at:at] = INACTIVE_USAGE
    return _line(columns, values)


def core_csv(cache_id: int, core_id: int, cache: dict[str, Any],
             core: dict[str, Any], by_id: bool,
             release: releases.Release, now: Optional[float] = None) -> str:
    inactive = core['status'] == 'Inactive'
    values = {
        'Core Id': str(core_id),
        'Core Device': core['device'] if by_id or inactive else
        core.get('resolved', core['device']),
        'Exported Object': '-' if inactive else '/dev/cas%d-%d' % (
            cache_id, core_id),
        # an inactive core has no device to measure
        'Core Size [4KiB Blocks]': '0' if inactive else str(
            core['size_blocks']),
        'Core Size [GiB]': '%.2f' % (
            0 if inactive else core['size_blocks'] * 4096 / 2 ** 30),
        'Status': core['status'],
        'Seq cutoff threshold [KiB]': '1024', 'Seq cutoff policy': 'full',
    }
    values.update(dirty_for(dirty_seconds(core, now)))
    occupancy = core['dirty'] + core['clean']
    values.update(_usage(occupancy, core['dirty'], cache['size_blocks'],
                         occupancy))
    values.update(_request_columns(core))
    return _line(core_columns(release), values)


#: usage rows of an IO class (print_ioclass_usage_stats: no "Free")
_CLASS_USAGE = ('Occupancy', 'Clean', 'Dirty')


def io_class_columns(release: releases.Release) -> list[str]:
    """The header of ``casadm -P -i N -d -o csv`` in *release*.

    print_stats_ioclass: the class's configuration, its usage without
    "Free", request and block counters (plural: summed over the cores),
    no error counters.
    """
    usage = ['%s [%s]' % (name, unit) for name in _CLASS_USAGE
             for unit in (BLOCKS, '%')]
    counters = [column for column in _counter_columns('(s)', release)
                if column.split(' [')[0] not in
                ('Occupancy', 'Free', 'Clean', 'Dirty') and
                'errors' not in column]
    return ['IO class ID', 'IO class name', 'Eviction priority',
            'Max size'] + usage + counters


def classify(rows: list[list], core_id: int) -> int:
    """The class id of core *core_id*'s requests (``core_id:eq:N`` rules).

    Rules are taken in class-id order, the last match wins unless
    ``done`` stops evaluation (classifier.c); class 0 otherwise.
    """
    chosen = 0
    for class_id, name, _priority, _percent in sorted(rows):
        terms = name.split('&')
        if 'core_id:eq:%d' % core_id in terms:
            chosen = class_id
            if 'done' in terms:
                break
    return chosen


def io_class_csv(cache: dict[str, Any], rows: list[list],
                 release: releases.Release,
                 class_id: Optional[int] = None) -> str:
    """``casadm -P -i N -d [ID] -o csv``: one line per configured class.

    A class's numbers are the sums over the cores whose requests it
    matches; Occupancy % is of the cache size, Clean and Dirty % of the
    class's occupancy.
    """
    header = io_class_columns(release)
    lines = [','.join(header)]
    size = cache['size_blocks']
    for row_id, name, priority, percent in sorted(rows):
        if class_id is not None and row_id != class_id:
            continue
        cores = [core for core_id, core in cache['cores'].items()
                 if classify(rows, int(core_id)) == row_id]
        occupancy = sum(c['dirty'] + c['clean'] for c in cores)
        dirty = sum(c['dirty'] for c in cores)
        values = {'IO class ID': str(row_id), 'IO class name': name,
                  'Eviction priority': 'Pinned' if priority is None
                  else str(priority), 'Max size': '%d%%' % percent}
        values.update(_usage(occupancy, dirty, size, occupancy))
        values['Occupancy [%]'] = _pct(occupancy, size)
        values.update(_request_columns({key: sum(
            c.get(key, 0) for c in cores) for key in (
                'read_hits', 'read_total', 'write_hits', 'write_total') +
            OPTIONAL}))
        lines.append(_line(header, values).splitlines()[1])
    return '\n'.join(lines) + '\n'
