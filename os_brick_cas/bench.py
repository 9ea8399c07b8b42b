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

"""fio profiles of the reference measurement, and its result table.

The reference (4k fio in a VM, Ceph disk vs Open CAS wt/wb) used random
read, random write and a 70/30 random mix at iodepth 1 (latency) and 16
(IOPS), libaio, direct I/O, time based. Latency shown is fio's total
latency (``lat_ns``: submission + completion), with percentiles enabled by
``lat_percentiles=1``.
"""

import dataclasses
import json
from typing import Any, Optional

PERCENTILES = ('99.000000', '99.900000', '99.990000')


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    rw: str
    iodepth: int
    rwmixread: Optional[int] = None

    @property
    def writes(self) -> bool:
        return self.rw != 'randread'


PROFILES = [
    Profile('randread-qd1', 'randread', 1),
    Profile('randread-qd16', 'randread', 16),
    Profile('randwrite-qd1', 'randwrite', 1),
    Profile('randwrite-qd16', 'randwrite', 16),
    Profile('randrw70-qd1', 'randrw', 1, 70),
    Profile('randrw70-qd16', 'randrw', 16, 70),
]


def fio_argv(profile: Profile, target: str, runtime: int,
             size: Optional[str] = None, ioengine: str = 'libaio'
             ) -> list[str]:
    """The fio command line (an argv list) for *profile* on *target*."""
    argv = ['fio', '--name=%s' % profile.name, '--filename=%s' % target,
            '--rw=%s' % profile.rw, '--bs=4k',
            '--iodepth=%d' % profile.iodepth, '--ioengine=%s' % ioengine,
            '--direct=1', '--time_based', '--runtime=%d' % runtime,
            '--numjobs=1', '--group_reporting', '--randrepeat=0',
            '--norandommap', '--lat_percentiles=1',
            '--percentile_list=50:99:99.9:99.99', '--output-format=json']
    if profile.rwmixread is not None:
        argv.append('--rwmixread=%d' % profile.rwmixread)
    if size:
        argv.append('--size=%s' % size)
    return argv


@dataclasses.dataclass
class Direction:
    """One direction (read or write) of one fio job, latencies in µs."""

    iops: float
    avg_us: float
    p99_us: Optional[float]
    p999_us: Optional[float]
    p9999_us: Optional[float]


def _direction(data: dict[str, Any]) -> Optional[Direction]:
    if not data or not data.get('total_ios'):
        return None
    lat = data.get('lat_ns') or {}
    percentiles = lat.get('percentile') or {}

    def pct(key: str) -> Optional[float]:
        value = percentiles.get(key)
        return None if value is None else value / 1000.0

    return Direction(iops=float(data['iops']),
                     avg_us=float(lat.get('mean', 0.0)) / 1000.0,
                     p99_us=pct(PERCENTILES[0]), p999_us=pct(PERCENTILES[1]),
                     p9999_us=pct(PERCENTILES[2]))


def parse_fio(output: str) -> dict[str, Direction]:
    """``{'read': Direction, 'write': Direction}`` of fio's JSON output.

    fio may print warnings before the JSON document; they are skipped.
    """
    start = output.find('{')
    if start < 0:
        raise ValueError('no JSON in fio output: %r' % output[:200])
    document = json.loads(output[start:])
    jobs = document.get('jobs') or []
    if len(jobs) != 1:
        raise ValueError('expected one fio job, got %d' % len(jobs))
    job = jobs[0]
    if job.get('error'):
        raise ValueError('fio job failed with error %s' % job['error'])
    result = {}
    for name in ('read', 'write'):
        direction = _direction(job.get(name) or {})
        if direction is not None:
            result[name] = direction
    return result


_ROW = '%-15s %-5s %-10s %10s %10s %10s %10s %9s'


def _fmt(value: Optional[float], unit: str = '') -> str:
    if value is None:
        return '-'
    if unit == 'iops':
        return '%.1fk' % (value / 1000.0) if value >= 1000 else '%.0f' % value
    return '%.1f' % value


def render_table(results: list[dict[str, Any]], labels: list[str]) -> str:
    """The reference table: one row per profile/direction/device.

    *results* items: ``{'profile': name, 'device': label, 'read':
    Direction|None, 'write': Direction|None}``. With two devices a ratio
    row (first / second, so "x faster") follows each pair.
    """
    header = _ROW % ('profile', 'dir', 'device', 'avg us', 'P99 us',
                     'P99.9 us', 'P99.99 us', 'IOPS')
    lines = [header, '-' * len(header)]
    by_key: dict[tuple[str, str], dict[str, Direction]] = {}
    for item in results:
        for name in ('read', 'write'):
            direction = item.get(name)
            if direction is None:
                continue
            by_key.setdefault((item['profile'], name), {})[
                item['device']] = direction
    for (profile, name), per_device in by_key.items():
        for label in labels:
            direction = per_device.get(label)
            if direction is None:
                continue
            lines.append(_ROW % (
                profile, name, label, _fmt(direction.avg_us),
                _fmt(direction.p99_us), _fmt(direction.p999_us),
                _fmt(direction.p9999_us), _fmt(direction.iops, 'iops')))
        if len(labels) == 2 and all(label in per_device for label in labels):
            base, other = (per_device[label] for label in labels)
            lines.append(_ROW % (
                '', '', 'ratio',
                _ratio(base.avg_us, other.avg_us),
                _ratio(base.p99_us, other.p99_us),
                _ratio(base.p999_us, other.p999_us),
                _ratio(base.p9999_us, other.p9999_us),
                _ratio(other.iops, base.iops)))
    legend = ("latency: fio total latency (lat_ns), percentiles from fio's "
              "histogram")
    if len(labels) == 2:
        legend += '; ratio = %s / %s (higher: %s faster)' % (
            labels[0], labels[1], labels[1])
    lines.append(legend)
    return '\n'.join(lines) + '\n'


def _ratio(numerator: Optional[float], denominator: Optional[float]) -> str:
    if not numerator or not denominator:
        return '-'
    return '%.1fx' % (numerator / denominator)
