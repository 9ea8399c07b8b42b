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

The header lines are casadm 26.03's own (tests/unit/os_brick_cas/data has
the formatter's output); values come from the simulated state and every
column not tracked here is zero.
"""

from typing import Any

CACHE_COLUMNS = [
    'Cache Id',
    'Cache Size [4KiB Blocks]',
    'Cache Size [GiB]',
    'Cache Device',
    'Exported Object',
    'Core Devices',
    'Inactive Core Devices',
    'Write Policy',
    'Cleaning Policy',
    'Promotion Policy',
    'Prefetch Policy',
    'Cache line size [KiB]',
    'Metadata Memory Footprint [MiB]',
    'Dirty for [s]',
    'Dirty for',
    'Status',
    'Occupancy [4KiB Blocks]',
    'Occupancy [%]',
    'Free [4KiB Blocks]',
    'Free [%]',
    'Clean [4KiB Blocks]',
    'Clean [%]',
    'Dirty [4KiB Blocks]',
    'Dirty [%]',
    'Read hits [Requests]',
    'Read hits [%]',
    'Read deferred [Requests]',
    'Read deferred [%]',
    'Read partial misses [Requests]',
    'Read partial misses [%]',
    'Read full misses [Requests]',
    'Read full misses [%]',
    'Read total [Requests]',
    'Read total [%]',
    'Write hits [Requests]',
    'Write hits [%]',
    'Write deferred [Requests]',
    'Write deferred [%]',
    'Write partial misses [Requests]',
    'Write partial misses [%]',
    'Write full misses [Requests]',
    'Write full misses [%]',
    'Write total [Requests]',
    'Write total [%]',
    'Pass-Through reads [Requests]',
    'Pass-Through reads [%]',
    'Pass-Through writes [Requests]',
    'Pass-Through writes [%]',
    'Serviced requests [Requests]',
    'Serviced requests [%]',
    'Prefetch: readahead [Requests]',
    'Prefetch: readahead [%]',
    'Cleaner [Requests]',
    'Cleaner [%]',
    'User requests [Requests]',
    'User requests [%]',
    'Total requests [Requests]',
    'Total requests [%]',
    'Reads from core(s) [4KiB Blocks]',
    'Reads from core(s) [%]',
    'Writes to core(s) [4KiB Blocks]',
    'Writes to core(s) [%]',
    'Total to/from core(s) [4KiB Blocks]',
    'Total to/from core(s) [%]',
    'Reads from cache [4KiB Blocks]',
    'Reads from cache [%]',
    'Writes to cache [4KiB Blocks]',
    'Writes to cache [%]',
    'Total to/from cache [4KiB Blocks]',
    'Total to/from cache [%]',
    'Reads from exported object(s) [4KiB Blocks]',
    'Reads from exported object(s) [%]',
    'Writes to exported object(s) [4KiB Blocks]',
    'Writes to exported object(s) [%]',
    'Total to/from exported object(s) [4KiB Blocks]',
    'Total to/from exported object(s) [%]',
    'Prefetch core reads: readahead [4KiB Blocks]',
    'Prefetch core reads: readahead [%]',
    'Prefetch cache writes: readahead [4KiB Blocks]',
    'Prefetch cache writes: readahead [%]',
    'Cleaner cache reads [4KiB Blocks]',
    'Cleaner cache reads [%]',
    'Cleaner core writes [4KiB Blocks]',
    'Cleaner core writes [%]',
    'Cache read errors [Requests]',
    'Cache read errors [%]',
    'Cache write errors [Requests]',
    'Cache write errors [%]',
    'Cache total errors [Requests]',
    'Cache total errors [%]',
    'Core read errors [Requests]',
    'Core read errors [%]',
    'Core write errors [Requests]',
    'Core write errors [%]',
    'Core total errors [Requests]',
    'Core total errors [%]',
    'Total errors [Requests]',
    'Total errors [%]',
]

CORE_COLUMNS = [
    'Core Id',
    'Core Device',
    'Exported Object',
    'Core Size [4KiB Blocks]',
    'Core Size [GiB]',
    'Dirty for [s]',
    'Dirty for',
    'Status',
    'Seq cutoff threshold [KiB]',
    'Seq cutoff policy',
    'Occupancy [4KiB Blocks]',
    'Occupancy [%]',
    'Free [4KiB Blocks]',
    'Free [%]',
    'Clean [4KiB Blocks]',
    'Clean [%]',
    'Dirty [4KiB Blocks]',
    'Dirty [%]',
    'Read hits [Requests]',
    'Read hits [%]',
    'Read deferred [Requests]',
    'Read deferred [%]',
    'Read partial misses [Requests]',
    'Read partial misses [%]',
    'Read full misses [Requests]',
    'Read full misses [%]',
    'Read total [Requests]',
    'Read total [%]',
    'Write hits [Requests]',
    'Write hits [%]',
    'Write deferred [Requests]',
    'Write deferred [%]',
    'Write partial misses [Requests]',
    'Write partial misses [%]',
    'Write full misses [Requests]',
    'Write full misses [%]',
    'Write total [Requests]',
    'Write total [%]',
    'Pass-Through reads [Requests]',
    'Pass-Through reads [%]',
    'Pass-Through writes [Requests]',
    'Pass-Through writes [%]',
    'Serviced requests [Requests]',
    'Serviced requests [%]',
    'Prefetch: readahead [Requests]',
    'Prefetch: readahead [%]',
    'Cleaner [Requests]',
    'Cleaner [%]',
    'User requests [Requests]',
    'User requests [%]',
    'Total requests [Requests]',
    'Total requests [%]',
    'Reads from core [4KiB Blocks]',
    'Reads from core [%]',
    'Writes to core [4KiB Blocks]',
    'Writes to core [%]',
    'Total to/from core [4KiB Blocks]',
    'Total to/from core [%]',
    'Reads from cache [4KiB Blocks]',
    'Reads from cache [%]',
    'Writes to cache [4KiB Blocks]',
    'Writes to cache [%]',
    'Total to/from cache [4KiB Blocks]',
    'Total to/from cache [%]',
    'Reads from exported object [4KiB Blocks]',
    'Reads from exported object [%]',
    'Writes to exported object [4KiB Blocks]',
    'Writes to exported object [%]',
    'Total to/from exported object [4KiB Blocks]',
    'Total to/from exported object [%]',
    'Prefetch core reads: readahead [4KiB Blocks]',
    'Prefetch core reads: readahead [%]',
    'Prefetch cache writes: readahead [4KiB Blocks]',
    'Prefetch cache writes: readahead [%]',
    'Cleaner cache reads [4KiB Blocks]',
    'Cleaner cache reads [%]',
    'Cleaner core writes [4KiB Blocks]',
    'Cleaner core writes [%]',
    'Cache read errors [Requests]',
    'Cache read errors [%]',
    'Cache write errors [Requests]',
    'Cache write errors [%]',
    'Cache total errors [Requests]',
    'Cache total errors [%]',
    'Core read errors [Requests]',
    'Core read errors [%]',
    'Core write errors [Requests]',
    'Core write errors [%]',
    'Core total errors [Requests]',
    'Core total errors [%]',
    'Total errors [Requests]',
    'Total errors [%]',
]


def _pct(part: float, whole: float) -> str:
    return '%.1f' % (100.0 * part / whole if whole else 0.0)


def _request_columns(core_like: dict[str, Any]) -> dict[str, str]:
    read_hits = core_like['read_hits']
    read_total = core_like['read_total']
    write_hits = core_like['write_hits']
    write_total = core_like['write_total']
    total = read_total + write_total
    values = {
        'Read hits [Requests]': read_hits,
        'Read full misses [Requests]': read_total - read_hits,
        'Read total [Requests]': read_total,
        'Write hits [Requests]': write_hits,
        'Write full misses [Requests]': write_total - write_hits,
        'Write total [Requests]': write_total,
        'Serviced requests [Requests]': total,
        'User requests [Requests]': total,
        'Total requests [Requests]': total,
    }
    out = {name: str(value) for name, value in values.items()}
    for name, value in values.items():
        out[name.replace('[Requests]', '[%]')] = _pct(value, total)
    return out


def _usage(occupancy: int, dirty: int, size: int) -> dict[str, str]:
    clean = occupancy - dirty
    free = max(size - occupancy, 0)
    out = {}
    for name, value in (('Occupancy', occupancy), ('Free', free),
                        ('Clean', clean), ('Dirty', dirty)):
        out['%s [4KiB Blocks]' % name] = str(value)
    out['Occupancy [%]'] = _pct(occupancy, size)
    out['Free [%]'] = _pct(free, size)
    out['Clean [%]'] = _pct(clean, occupancy)
    out['Dirty [%]'] = _pct(dirty, occupancy)
    return out


def _line(header: list[str], values: dict[str, str]) -> str:
    def quote(value: str) -> str:
        return '"%s"' % value if ',' in value else value
    return '%s\n%s\n' % (','.join(header), ','.join(
        quote(values.get(name, '0')) for name in header))


def cache_csv(cache_id: int, cache: dict[str, Any]) -> str:
    cores = list(cache['cores'].values())
    dirty = sum(c['dirty'] for c in cores)
    occupancy = sum(c['dirty'] + c['clean'] for c in cores)
    totals = {key: sum(c[key] for c in cores) for key in
              ('read_hits', 'read_total', 'write_hits', 'write_total')}
    values = {
        'Cache Id': str(cache_id),
        'Cache Size [4KiB Blocks]': str(cache['size_blocks']),
        'Cache Size [GiB]': '%.2f' % (cache['size_blocks'] * 4096 / 2 ** 30),
        'Cache Device': cache['device'], 'Exported Object': '-',
        'Core Devices': str(len(cores)),
        'Inactive Core Devices': str(sum(
            1 for c in cores if c['status'] == 'Inactive')),
        'Write Policy': cache['mode'], 'Cleaning Policy': 'alru',
        'Promotion Policy': 'always', 'Prefetch Policy': 'none',
        'Cache line size [KiB]': '4',
        'Metadata Memory Footprint [MiB]': '145.2',
        'Dirty for': 'Cache clean' if not dirty else '0 [s]',
        'Status': cache['status'],
    }
    values.update(_usage(occupancy, dirty, cache['size_blocks']))
    values.update(_request_columns(totals))
    return _line(CACHE_COLUMNS, values)


def core_csv(cache_id: int, core_id: int, cache: dict[str, Any],
             core: dict[str, Any], by_id: bool) -> str:
    inactive = core['status'] == 'Inactive'
    values = {
        'Core Id': str(core_id),
        'Core Device': core['device'] if by_id or inactive else
        core.get('resolved', core['device']),
        'Exported Object': '-' if inactive else '/dev/cas%d-%d' % (
            cache_id, core_id),
        'Core Size [4KiB Blocks]': str(core['size_blocks']),
        'Core Size [GiB]': '%.2f' % (core['size_blocks'] * 4096 / 2 ** 30),
        'Dirty for': 'Cache clean' if not core['dirty'] else '0 [s]',
        'Status': core['status'],
        'Seq cutoff threshold [KiB]': '1024', 'Seq cutoff policy': 'full',
    }
    values.update(_usage(core['dirty'] + core['clean'], core['dirty'],
                         cache['size_blocks']))
    values.update(_request_columns(core))
    return _line(CORE_COLUMNS, values)
