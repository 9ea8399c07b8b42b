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

"""``os-brick-cas bench``: the reference fio table on one or two devices.

Typical use on a compute node, with a *scratch* cached volume attached::

    os-brick-cas bench --device ceph=/dev/rbd/volumes/volume-X \\
        --device cas=/dev/cas2-1 --destroy-data --where "node12, Optane"

Figures are whatever the given devices deliver on the machine it runs on;
``--where`` is printed with them so nobody mistakes where they came from.
"""

import argparse
import dataclasses
import os
import stat
import sys
from typing import Any, Optional

from oslo_concurrency import processutils

from os_brick_cas import bench
from os_brick_cas import benchplot
from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import output
from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from os_brick_cas import report

FIO_GRACE_SECONDS = 60


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'bench', help='fio 4k randread/randwrite/randrw70 at QD1 and QD16, '
                      'side by side for two devices')
    parser.add_argument('--device', action='append', required=True,
                        metavar='[LABEL=]PATH',
                        help='device or file to test; give two to compare '
                             '(e.g. ceph=/dev/rbd/... cas=/dev/cas1-1)')
    parser.add_argument('--runtime', type=int, default=30,
                        help='seconds per profile and device (default 30)')
    parser.add_argument('--profiles', default=','.join(
        p.name for p in bench.PROFILES),
        help='comma-separated subset of: %s' % ', '.join(
            p.name for p in bench.PROFILES))
    parser.add_argument('--size', help='fio --size (for files)')
    parser.add_argument('--repeat', type=int, default=1,
                        help='runs per profile and device; each run shows '
                             'its own read hit ratio (the cache warming up)')
    parser.add_argument('--destroy-data', action='store_true',
                        help='allow write profiles on block devices (they '
                             'overwrite the device: scratch volumes only)')
    parser.add_argument('--where', default='(not given)',
                        help='where this runs, printed with the figures')
    parser.add_argument('--plot', metavar='FILE.png',
                        help='also draw the latency percentiles and the read '
                             'hit ratio per run into FILE.png (needs '
                             'matplotlib: os-brick-cas[plot])')
    parser.set_defaults(func=run)


def parse_devices(specs: list[str]) -> list[tuple[str, str]]:
    """``[(label, path)]`` from ``[LABEL=]PATH`` arguments."""
    if not 1 <= len(specs) <= 2:
        raise SystemExit('give one or two --device')
    devices = []
    for spec in specs:
        label, _, path = spec.rpartition('=')
        path = path or spec
        devices.append((label or os.path.basename(path), path))
    if len({label for label, _ in devices}) != len(devices):
        raise SystemExit('device labels must differ')
    return devices


def _is_block(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        raise SystemExit('%s does not exist' % path)


def hit_ratio(path: str) -> Optional[float]:
    """Read hit ratio of the core behind *path*, None if not a CAS core."""
    ids = casadm_output.core_of_exported(path)
    if ids is None:
        return None
    try:
        return report.hit_ratio(casadm_mod.Casadm().stats(*ids), 'Read')
    except exception.CasError:
        return None


def read_counters(path: str) -> Optional[tuple[int, int]]:
    """(read hits, reads incl. passed through) of the core behind *path*.

    None if *path* is not a CAS core or its counters cannot be read.
    """
    ids = casadm_output.core_of_exported(path)
    if ids is None:
        return None
    try:
        counted = report.requests_of(casadm_mod.Casadm().stats(*ids), 'Read')
    except exception.CasError:
        return None
    if counted is None:
        return None
    return int(counted[0]), int(counted[1])


def _run_hit_ratio(before: Optional[tuple[int, int]],
                   after: Optional[tuple[int, int]]) -> Optional[float]:
    """Read hits / reads of one run, from counters around it."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def run_profiles(devices: list[tuple[str, str]],
                 profiles: list[bench.Profile], runtime: int,
                 size: Optional[str], repeat: int = 1
                 ) -> list[dict[str, Any]]:
    results = []
    for profile in profiles:
        for run_number in range(1, repeat + 1):
            for label, path in devices:
                print('running %s on %s (%s), %ds...' % (
                    profile.name, label, path, runtime), file=sys.stderr,
                    flush=True)
                counters = read_counters(path)
                # fio's runtime does not bound I/O stuck in the device
                out, _err = processutils.execute(
                    *bench.fio_argv(profile, path, runtime, size),
                    timeout=runtime + FIO_GRACE_SECONDS)
                result: dict[str, Any] = {
                    'profile': profile.name if repeat == 1 else
                    '%s #%d' % (profile.name, run_number),
                    'device': label, 'run': run_number,
                    'read_hit_ratio': _run_hit_ratio(
                        counters, read_counters(path))}
                result.update(bench.parse_fio(out))
                results.append(result)
    return results


#: one row per profile run, direction and device (``-f value``/``csv``)
COLUMNS = ('profile', 'direction', 'device', 'avg_us', 'p99_us', 'p999_us',
           'p9999_us', 'iops', 'read_hit_ratio')


def _rows(results: list[dict[str, Any]]) -> list[tuple]:
    rows = []
    for item in results:
        for direction in ('read', 'write'):
            figures = item.get(direction)
            if figures is not None:
                rows.append((item['profile'], direction, item['device'],
                             figures.avg_us, figures.p99_us, figures.p999_us,
                             figures.p9999_us, figures.iops,
                             item['read_hit_ratio']))
    return rows


def _text(args: argparse.Namespace, devices: list[tuple[str, str]],
          results: list[dict[str, Any]], before: dict, after: dict) -> str:
    """The reference table with where it was measured and hit ratios."""
    labels = [label for label, _ in devices]
    lines = ['os-brick-cas bench: 4k, libaio, direct, %ds per run; measured '
             'on: %s' % (args.runtime, args.where)]
    lines += ['  %-10s %s' % (label, path) for label, path in devices]
    lines.append(bench.render_table(results, labels).rstrip('\n'))
    for label, path in devices:
        if before[label] is not None or after[label] is not None:
            lines.append('Open CAS read hit ratio of %s: %s before, %s after'
                         % (label, report.percent(before[label]),
                            report.percent(after[label])))
        per_run = ['%s %s' % (item['profile'], report.percent(
            item['read_hit_ratio'])) for item in results
            if item['device'] == label and
            item['read_hit_ratio'] is not None]
        if per_run:
            lines.append('read hit ratio per run of %s: %s' % (
                label, ', '.join(per_run)))
    return '\n'.join(lines) + '\n'


def run(args: argparse.Namespace) -> int:
    devices = parse_devices(args.device)
    wanted = [name.strip() for name in args.profiles.split(',') if name]
    known = {profile.name: profile for profile in bench.PROFILES}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise SystemExit('unknown profile(s) %s' % ', '.join(unknown))
    profiles = [known[name] for name in wanted]
    if any(p.writes for p in profiles) and not args.destroy_data and any(
            _is_block(path) for _, path in devices):
        raise SystemExit('write profiles overwrite the block device; run '
                         'them only on scratch volumes, with '
                         '--destroy-data, or choose read profiles only')
    if args.plot:
        try:
            benchplot.require()     # before minutes of fio, not after
        except benchplot.PlotUnavailable as exc:
            print('os-brick-cas bench: %s' % exc, file=sys.stderr)
            return 2
    before = {label: hit_ratio(path) for label, path in devices}
    try:
        results = run_profiles(devices, profiles, args.runtime, args.size,
                               max(1, args.repeat))
    except processutils.ProcessExecutionError as exc:
        print('fio failed: %s' % exc, file=sys.stderr)
        return 1
    after = {label: hit_ratio(path) for label, path in devices}
    if args.plot:
        benchplot.plot(results, args.plot, args.where)
    document = {
        'where': args.where, 'runtime_s': args.runtime,
        'devices': dict(devices),
        'read_hit_ratio': {'before': before, 'after': after},
        'results': [{key: dataclasses.asdict(value)
                     if dataclasses.is_dataclass(value) else value
                     for key, value in item.items()} for item in results]}
    output.emitter(args)(document, COLUMNS, lambda: _rows(results),
                         lambda: _text(args, devices, results, before, after))
    return 0
