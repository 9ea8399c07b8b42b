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

"""The pure part of the peer benchmark (benchmarks/peers.py).

The case table, the stacks, fio's JSON, the peers' status lines (bcache's
sysfs sizes, dm-cache and dm-writecache ``dmsetup status``), the guest's
CPU counters and the host layout an Open CAS stack is set up by (the
product's per-mode defaults, or a variant of them). Nothing here runs a
command.
"""

import dataclasses
import json
import re
from typing import Any, Optional

import yaml

from os_brick_cas.host import layout_file
from os_brick_cas.opencas import casadm_params as P

#: the product's sequential cut-off threshold, given to bcache as well
SEQ_CUTOFF_KIB = layout_file.DIRTY_DEFAULTS[P.SEQ_CUTOFF]['threshold_kib']


@dataclasses.dataclass(frozen=True)
class Case:
    """One fio run on a stack.

    *span* ``range``: the fixed range (fits the cache); ``image``: the
    whole image (larger than the cache). *full*: not time based, every
    block once (the warm-up pass). *wb_only*: only on write-back stacks.
    *cleaning*: ``stop`` stops the stack's cleaning before the run,
    ``start`` restarts it. *sample_dirty*: dirty data sampled during it.
    """

    name: str
    rw: str
    iodepth: int = 1
    bs: str = '4k'
    span: str = 'range'
    zipf: Optional[float] = None
    full: bool = False
    wb_only: bool = False
    cleaning: Optional[str] = None
    sample_dirty: bool = False
    study: str = ''


#: in run order on every stack (the warm-up feeds the hit cases)
CASES = (
    Case('cold-randread-qd1', 'randread', study='4: cold read; seed 4k QD1'),
    Case('warm-up', 'randread', 16, full=True,
         study='5: read the fixed range once'),
    Case('hit-randread-qd1', 'randread', study='5: read hit, fixed range'),
    Case('hit-randread-qd16', 'randread', 16, study='QD16 read'),
    Case('seq-scan', 'read', 4, bs='128k', span='image', full=True,
         study='sequential scan through a warm cache'),
    Case('after-scan-randread-qd1', 'randread',
         study='5 after the scan: did the scan evict the range?'),
    Case('zipf-randread-qd1', 'randread', span='image', zipf=1.1,
         study='skewed working set larger than the cache'),
    Case('randwrite-qd1', 'randwrite', study='seed 4k QD1 write'),
    Case('randwrite-qd16', 'randwrite', 16, study='QD16 write'),
    Case('fill-no-cleaning', 'randwrite', 16, span='image', wb_only=True,
         cleaning='stop', sample_dirty=True,
         study='1: write-only caching, cleaning stopped, until full'),
    Case('write-while-cleaning', 'randwrite', wb_only=True,
         cleaning='start', sample_dirty=True,
         study='2: write while cleaning'),
    Case('read-while-cleaning', 'randread', wb_only=True,
         sample_dirty=True, study='3: read while cleaning'),
)


@dataclasses.dataclass(frozen=True)
class Stack:
    """One cache stack: *kind* krbd, cas, bcache, dmcache or dmwritecache.

    *layout*: an Open CAS stack's host-layout fields that differ from the
    product's defaults, as (dotted key, value) pairs: ``line_size_kib``
    or ``<section>.<field>`` (``cleaning.policy``, ``cleaning.wake_up_s``,
    ``promotion.policy``, ``seq_cutoff.threshold_kib``).
    """

    name: str
    kind: str
    mode: Optional[str] = None   # wt, wb (None: krbd)
    layout: tuple[tuple[str, Any], ...] = ()

    @property
    def write_back(self) -> bool:
        return self.mode == 'wb'

    @property
    def cleaning(self) -> Optional[str]:
        """An Open CAS stack's cleaning policy (the layout's or default)."""
        if self.kind != 'cas' or self.mode is None:
            return None
        return self.instance_layout(1, '/dev/ram0').policy(P.CLEANING)

    def layout_document(self, cache_id: int, device: str) -> dict[str, Any]:
        """The host layout (one instance) the product sets this stack by."""
        instance: dict[str, Any] = {'id': cache_id, 'mode': self.mode,
                                    'device': device}
        for key, value in self.layout:
            section, _, field = key.rpartition('.')
            if section:
                instance.setdefault(section, {})[field] = value
            else:
                instance[field] = value
        return {'version': 1, 'instances': [instance]}

    def instance_layout(self, cache_id: int, device: str
                        ) -> layout_file.InstanceLayout:
        """The validated layout instance (HostLayoutInvalid if not valid)."""
        text = yaml.safe_dump(self.layout_document(cache_id, device))
        return layout_file.parse(text, self.name).instances[0]


#: variants of the product's Open CAS configuration run by default: each
#: changes one of its defaults, so the run shows what that default buys
#: (doc/source/admin/tuning.rst points to these rows)
DEFAULT_VARIANTS = (
    # cleaning policy: ACP instead of ALRU
    'cas-wb-acp=wb:cleaning.policy=acp',
    # ALRU as Open CAS ships it: the product's wake-up, staleness,
    # activity threshold and dirty-ratio trigger undone
    'cas-wb-ocf=wb:cleaning.wake_up_s=20,cleaning.staleness_s=120,'
    'cleaning.activity_threshold_ms=10000,'
    'cleaning.dirty_ratio_threshold_pct=100',
    # ALRU flushing ten times as many lines per pass
    'cas-wb-fmb1000=wb:cleaning.flush_max_buffers=1000',
    # cache line size
    'cas-wb-64k=wb:line_size_kib=64',
    # no sequential cut-off
    'cas-wb-noseq=wb:seq_cutoff.policy=never',
    # write-through promoting every miss instead of nhit
    'cas-wt-always=wt:promotion.policy=always',
)


def parse_variant(text: str) -> Stack:
    """``NAME=MODE[:KEY=VALUE,...]``: an Open CAS stack with layout changes.

    ``cas-wb-64k=wb:line_size_kib=64``; values are YAML scalars. The
    result is checked against the host layout's own validation.
    """
    name, sep, rest = text.partition('=')
    mode, _, assignments = rest.partition(':')
    if not sep or not re.fullmatch(r'cas-[a-z0-9.-]+', name) or \
            mode not in ('wt', 'wb'):
        raise ValueError('a variant is NAME=MODE[:KEY=VALUE,...] with NAME '
                         'cas-... and MODE wt or wb, not %r' % text)
    layout = []
    for assignment in filter(None, assignments.split(',')):
        key, sep, value = assignment.partition('=')
        section = key.rpartition('.')[0]
        sections = layout_file.SECTION_KEYS.values()
        if not sep or (section and section not in sections) or \
                (not section and key != 'line_size_kib'):
            raise ValueError('%r in variant %s: KEY is line_size_kib or '
                             '<%s>.<field>' % (assignment, name,
                                               '|'.join(sections)))
        layout.append((key, yaml.safe_load(value)))
    stack = Stack(name, 'cas', mode, tuple(layout))
    stack.instance_layout(1, '/dev/ram0')   # HostLayoutInvalid if wrong
    return stack


def stacks(variants: list[Stack]) -> list[Stack]:
    """Every stack of one run: plain krbd, the write-back ones, then wt.

    Open CAS as the product configures it first, its *variants* after it.
    Write-back first: they run every case, so a run cut short by the
    guest's time bound still compares all four caches.
    """
    def cas(mode: str) -> list[Stack]:
        return [Stack('cas-' + mode, 'cas', mode)] + [
            variant for variant in variants if variant.mode == mode]
    return ([Stack('krbd', 'krbd')] + cas('wb') +
            [Stack('bcache-wb', 'bcache', 'wb'),
             Stack('dmcache-wb', 'dmcache', 'wb'),
             Stack('dmwritecache', 'dmwritecache', 'wb')] + cas('wt') +
            [Stack('bcache-wt', 'bcache', 'wt'),
             Stack('dmcache-wt', 'dmcache', 'wt')])


def cases_for(stack: Stack) -> list[Case]:
    """The cases run on *stack*: the write-back ones only on wb stacks.

    dm-writecache runs the read cases too (it caches no reads: it shows).
    """
    return [case for case in CASES if stack.write_back or not case.wb_only]


def plan(stack_list: list[Stack]) -> list[str]:
    """The plan, one line per stack: its cases."""
    return ['%-14s %s' % (stack.name, ', '.join(
        case.name for case in cases_for(stack))) for stack in stack_list]


def fio_argv(case: Case, path: str, runtime: int, span_mb: int) -> list[str]:
    """fio's argv of *case* on *path* over its first *span_mb* MiB."""
    argv = ['fio', '--name=%s' % case.name, '--filename=%s' % path,
            '--rw=%s' % case.rw, '--bs=%s' % case.bs,
            '--iodepth=%d' % case.iodepth, '--ioengine=libaio',
            '--direct=1', '--numjobs=1', '--size=%dM' % span_mb,
            '--lat_percentiles=1', '--percentile_list=50:99',
            '--output-format=json']
    if case.full:
        argv.append('--randrepeat=0')    # random map: every block once
    else:
        argv += ['--time_based', '--runtime=%d' % runtime,
                 '--randrepeat=0', '--norandommap']
    if case.zipf is not None:
        argv.append('--random_distribution=zipf:%s' % case.zipf)
    return argv


def parse_fio(output: str) -> dict[str, Any]:
    """Per direction: iops, avg_us, p99_us, ios; and the job's runtime."""
    start = output.find('{')
    if start < 0:
        raise ValueError('no JSON in fio output: %r' % output[:200])
    jobs = json.loads(output[start:]).get('jobs') or []
    if len(jobs) != 1:
        raise ValueError('expected one fio job, got %d' % len(jobs))
    job = jobs[0]
    if job.get('error'):
        raise ValueError('fio job failed with error %s' % job['error'])
    result: dict[str, Any] = {'ios': 0}
    for name in ('read', 'write'):
        data = job.get(name) or {}
        ios = int(data.get('total_ios') or 0)
        if not ios:
            continue
        lat = data.get('lat_ns') or {}
        p99 = (lat.get('percentile') or {}).get('99.000000')
        result[name] = {'iops': float(data['iops']), 'ios': ios,
                        'avg_us': float(lat.get('mean', 0.0)) / 1000.0,
                        'p99_us': None if p99 is None else p99 / 1000.0}
        result['ios'] += ios
    return result


def cpu_busy_ticks(proc_stat: str) -> tuple[int, int]:
    """(busy, total) clock ticks of /proc/stat's ``cpu`` line."""
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields and fields[0] == 'cpu':
            ticks = [int(value) for value in fields[1:]]
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
            return sum(ticks) - idle, sum(ticks)
    raise ValueError('no cpu line in /proc/stat')


def cpu_us_per_io(before: str, after: str, ios: int, hz: int
                  ) -> Optional[float]:
    """Busy CPU time of the whole guest per IO, in µs."""
    if ios <= 0:
        return None
    busy = cpu_busy_ticks(after)[0] - cpu_busy_ticks(before)[0]
    return busy * 1e6 / hz / ios


_UNITS = {'': 1, 'k': 2 ** 10, 'M': 2 ** 20, 'G': 2 ** 30, 'T': 2 ** 40}


def parse_bcache_size(text: str) -> int:
    """Bytes of bcache's human sizes (``dirty_data``: ``12.5M``, ``0.0k``)."""
    match = re.fullmatch(r'\s*([0-9.]+)([kMGT]?)\s*', text)
    if not match:
        raise ValueError('not a bcache size: %r' % text)
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def _status_fields(line: str, target: str) -> list[str]:
    fields = line.split()
    if len(fields) < 3 or fields[2] != target:
        raise ValueError('not a %s status line: %r' % (target, line))
    return fields[3:]


def parse_dmcache_status(line: str) -> dict[str, int]:
    """dm-cache's ``dmsetup status``: blocks, read hits/misses, dirty.

    ``<md block> <used>/<total md> <cache block> <used>/<total cache>
    <read hits> <read misses> <write hits> <write misses> <demotions>
    <promotions> <dirty> ...`` (the kernel's dm-cache documentation).
    """
    fields = _status_fields(line, 'cache')
    used, total = (int(part) for part in fields[3].split('/'))
    return {'block_sectors': int(fields[2]), 'used_blocks': used,
            'total_blocks': total, 'read_hits': int(fields[4]),
            'read_misses': int(fields[5]), 'write_hits': int(fields[6]),
            'write_misses': int(fields[7]), 'dirty_blocks': int(fields[10])}


def parse_writecache_status(line: str) -> dict[str, int]:
    """dm-writecache's status line.

    ``<error> <total> <free> <writeback>``, then (5.15+) ``<read blocks>
    <read hits> ...``.
    """
    fields = [int(value) for value in _status_fields(line, 'writecache')]
    result = {'error': fields[0], 'total_blocks': fields[1],
              'free_blocks': fields[2], 'writeback_blocks': fields[3]}
    if len(fields) >= 6:
        result.update(read_blocks=fields[4], read_hits=fields[5])
    return result


def hit_ratio(hits: int, total: int) -> Optional[float]:
    return None if total <= 0 else hits / total


# -- the summary table (README, tuning guide) --------------------------------

#: (column title, case, what of it): ``avg``/``p99`` latency in µs,
#: ``kiops``, ``hit`` (read hit %), ``cpu`` (µs per IO), ``dirty`` (max
#: MiB), ``drain`` (s)
SUMMARY = (
    ('cold rd', 'cold-randread-qd1', 'avg'),
    ('hit rd', 'hit-randread-qd1', 'avg'),
    ('cpu/hit', 'hit-randread-qd1', 'cpu'),
    ('kIOPS16', 'hit-randread-qd16', 'kiops'),
    ('scan', 'seq-scan', 'avg'),
    ('kept%', 'after-scan-randread-qd1', 'hit'),
    ('zipf%', 'zipf-randread-qd1', 'hit'),
    ('wr', 'randwrite-qd1', 'avg'),
    ('wr cln', 'write-while-cleaning', 'avg'),
    ('p99', 'write-while-cleaning', 'p99'),
    ('rd cln', 'read-while-cleaning', 'avg'),
    ('dirty', 'read-while-cleaning', 'dirty'),
    ('drain', None, 'drain'),
)


def summary_cell(entry: dict[str, Any], case: Optional[str], what: str
                 ) -> str:
    """One cell of the summary table; ``-`` where the stack has none."""
    if what == 'drain':
        seconds = (entry.get('drain') or {}).get('seconds')
        if entry.get('drain') and seconds is None:
            return '>%s' % (entry['drain'].get('timeout') or 'limit')
        return '-' if seconds is None else '%.0f' % seconds
    row = next((row for row in entry.get('cases', [])
                if row.get('case') == case), None)
    if row is None:
        return '-'
    direction = row.get('read') or row.get('write') or {}
    value: Optional[float] = {
        'avg': direction.get('avg_us'), 'p99': direction.get('p99_us'),
        'kiops': (direction['iops'] / 1000) if 'iops' in direction
        else None,
        'cpu': row.get('cpu_us_per_io'),
        'hit': (100 * row['read_hit_ratio'])
        if row.get('read_hit_ratio') is not None else None,
        'dirty': max(value for _, value in row['dirty']) / 2 ** 20
        if row.get('dirty') else None}[what]
    if value is None:
        return '-'
    return '%.1f' % value if what == 'kiops' else '%.0f' % value


def summary_table(document: dict[str, Any],
                  stacks: Optional[list[str]] = None) -> str:
    """The summary of *document* as an RST simple table, a row a stack."""
    entries = [entry for entry in document.get('stacks', [])
               if 'stack' in entry and
               (stacks is None or entry['stack'] in stacks)]
    header = ['stack'] + [title for title, _, _ in SUMMARY]
    rows = [[entry['stack']] + [summary_cell(entry, case, what)
                                for _, case, what in SUMMARY]
            for entry in entries]
    widths = [max(len(line[index]) for line in [header] + rows)
              for index in range(len(header))]
    rule = '  '.join('=' * width for width in widths)

    def line(cells: list[str]) -> str:
        return '  '.join(cell.ljust(width) if index == 0 else
                         cell.rjust(width)
                         for index, (cell, width) in
                         enumerate(zip(cells, widths))).rstrip()
    return '\n'.join([rule, line(header), rule] + [line(row) for row in rows]
                     + [rule])
