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

"""Control-plane cost of a cached attach, against the SIMULATED host.

Prints, for plain krbd attach (os-brick's RBDConnector) and cached attach
(os_brick_cas's CachedRBDConnector):

* privileged calls per attach and per detach (root commands run, plus
  privsep file operations such as the by-id link and opencas.conf rows);
* Python time per attach/detach, i.e. wall time minus time spent waiting
  for subprocesses, and the part of it spent in privsep file writes;
* wall time of N concurrent attaches followed by N concurrent detaches on
  one host, and the cached/plain ratio.

The casadm/rbd stand-ins sleep ``--latency-ms`` per command to stand for
the real tools. Every figure is from the simulator on the machine this
runs on; none is an Open CAS hardware figure.

Run as root (the simulator creates /dev entries)::

    .venv/bin/python benchmarks/control_plane.py [--latency-ms 20]
"""

import argparse
import concurrent.futures
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

from os_brick.initiator.connectors import rbd as brick_rbd
from oslo_concurrency import processutils
from oslo_config import cfg

from cas_standin import fixture
from os_brick_cas.cmd import commands as cas_cmd
from os_brick_cas import connector as cas_connector
from os_brick_cas import opts
from os_brick_cas.privileged import devices as priv_devices

CONF = cfg.CONF
POOL = 'volumes'


class Meter(object):
    """Counts privsep file operations and time spent in subprocesses."""

    def __init__(self) -> None:
        self.subprocess_seconds = 0.0
        self.file_ops: list[str] = []
        self.file_op_seconds = 0.0
        original_execute = processutils.execute

        def timed_execute(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original_execute(*args, **kwargs)
            finally:
                self.subprocess_seconds += time.perf_counter() - start

        processutils.execute = timed_execute
        for name in ('link_by_id', 'unlink_by_id', 'record_core',
                     'forget_core'):
            setattr(priv_devices, name,
                    self._counting(name, getattr(priv_devices, name)))

    def _counting(self, name: str, function: Callable) -> Callable:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.file_ops.append(name)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.file_op_seconds += time.perf_counter() - start
        return counted


#: the simulator's two instances with every parameter left to its default
HOST_LAYOUT = '''instances:
  - {id: 1, mode: wt, device: /dev/disk/by-id/nvme-sim-part1}
  - {id: 2, mode: wb, device: /dev/disk/by-id/nvme-sim-part2}
'''


def props(image: str, cached: bool, mode: str) -> dict[str, Any]:
    data = {'name': '%s/%s' % (POOL, image), 'hosts': ['127.0.0.1'],
            'ports': ['6789'], 'auth_username': 'cinder',
            'cluster_name': 'ceph', 'volume_id': image,
            'auth_enabled': False}
    if cached:
        data.update(cacheable=True, cache_mode=mode)
    return data


def connectors() -> dict[str, Any]:
    return {'plain': brick_rbd.RBDConnector(None, do_local_attach=True),
            'cached': cas_connector.CachedRBDConnector(None)}


#: stand-ins the product runs without root (not counted as privileged)
UNPRIVILEGED_TOOLS = ('udevadm',)


def privileged_calls(host: fixture.SimulatedHost, meter: Meter,
                     action: Callable[[], Any]
                     ) -> tuple[list[str], float, float]:
    """Privileged calls *action* made, its Python and file-write seconds.

    Python seconds are wall minus subprocess time; they include the
    privsep file operations (fsync'd opencas.conf rows, by-id links),
    also returned on their own. Only *action* is timed: reading the
    simulator's call log is the benchmark's own work.
    """
    calls_before = len(host.calls())
    ops_before = len(meter.file_ops)
    sub_before = meter.subprocess_seconds
    files_before = meter.file_op_seconds
    start = time.perf_counter()
    action()
    python_seconds = (time.perf_counter() - start -
                      (meter.subprocess_seconds - sub_before))
    # udevadm settle runs as the service's own user: not privileged
    commands = ['%s %s' % (c['tool'], c['verb'])
                for c in host.calls()[calls_before:]
                if c['tool'] not in UNPRIVILEGED_TOOLS]
    return (commands + ['privsep %s' % op
                        for op in meter.file_ops[ops_before:]],
            python_seconds, meter.file_op_seconds - files_before)


def _median_ms(timings: list[tuple[float, float]], index: int) -> float:
    return 1000 * statistics.median(t[index] for t in timings)


def measure_sequential(host: fixture.SimulatedHost, meter: Meter,
                       rounds: int, mode: str) -> dict[str, Any]:
    result = {}
    for kind, connector in connectors().items():
        python_attach, python_detach, walls = [], [], []
        calls: dict[str, list[str]] = {}
        for number in range(rounds):
            image = 'volume-seq-%s-%d' % (kind, number)
            host.create_image(POOL, image)
            volume = props(image, kind == 'cached', mode)
            info: dict[str, Any] = {}
            round_start = time.perf_counter()
            steps = (
                ('attach', python_attach,
                 lambda: info.update(connector.connect_volume(volume))),
                ('detach', python_detach,
                 lambda: connector.disconnect_volume(volume, info)))
            for step, timings, action in steps:
                made, python_seconds, file_seconds = privileged_calls(
                    host, meter, action)
                timings.append((python_seconds, file_seconds))
                calls.setdefault(step, made)
            walls.append(time.perf_counter() - round_start)
        result[kind] = {'calls': calls,
                        'python_attach_ms': _median_ms(python_attach, 0),
                        'python_detach_ms': _median_ms(python_detach, 0),
                        'files_attach_ms': _median_ms(python_attach, 1),
                        'files_detach_ms': _median_ms(python_detach, 1),
                        'wall_s': statistics.median(walls)}
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_concurrent(host: fixture.SimulatedHost, volumes: int,
                       mode: str) -> dict[str, dict[str, float]]:
    walls = {}
    for kind, connector in connectors().items():
        volume_props = []
        for number in range(volumes):
            image = 'volume-par-%s-%d' % (kind, number)
            host.create_image(POOL, image)
            volume_props.append(props(image, kind == 'cached', mode))
        with concurrent.futures.ThreadPoolExecutor(volumes) as pool:
            cpu_before = _children_cpu()
            start = time.perf_counter()
            infos = list(pool.map(connector.connect_volume, volume_props))
            list(pool.map(connector.disconnect_volume, volume_props, infos))
            walls[kind] = {'wall_s': time.perf_counter() - start,
                           'stand_in_cpu_s': _children_cpu() - cpu_before}
    return walls


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--latency-ms', type=float, default=20.0,
                        help='sleep of each stand-in command (default 20)')
    parser.add_argument('--rounds', type=int, default=10,
                        help='sequential attach/detach rounds per kind')
    parser.add_argument('--concurrent', type=int, default=64,
                        help='volumes attached at once (default 64)')
    parser.add_argument('--mode', default='wt', choices=['wt', 'wb'],
                        help='cache mode of the cached volumes')
    parser.add_argument('--udev-rule', action='store_true',
                        help='simulate the shipped udev rule (by-id links '
                             'made by udev, not by the connector)')
    parser.add_argument('--host-layout', action='store_true',
                        help='a host layout with the per-mode defaults '
                             '(sequential cut-off always/64 KiB): each new '
                             'core is given it (casadm -X seq-cutoff)')
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print('run as root: the simulator creates /dev entries',
              file=sys.stderr)
        return 2

    workdir = tempfile.mkdtemp(prefix='os-brick-cas-bench-')
    conf_path = os.path.join(workdir, 'opencas.conf')
    with open(conf_path, 'w') as conf_file:
        conf_file.write('version=19.3.0\n[caches]\n'
                        '1\t/dev/disk/by-id/nvme-sim-part1\tWT\n'
                        '2\t/dev/disk/by-id/nvme-sim-part2\tWB\n[cores]\n')
    CONF([], project='os-brick-cas')
    CONF.set_override('cache_instances', {'wt': '1', 'wb': '2'},
                      group=opts.GROUP)
    CONF.set_override('opencas_conf', conf_path, group=opts.GROUP)
    CONF.set_override('lock_path', workdir, group=opts.GROUP)
    layout_path = os.path.join(workdir, 'host-layout.yaml')
    if args.host_layout:
        with open(layout_path, 'w') as layout_file:
            layout_file.write(HOST_LAYOUT)
    CONF.set_override('host_layout', layout_path, group=opts.GROUP)
    cas_cmd.run_privileged_in_process_as_root()
    host = fixture.SimulatedHost(caches={1: 'wt', 2: 'wb'},
                                 udev_by_id=args.udev_rule)
    host.setUp()
    try:
        host.set_opencas_conf(conf_path)
        CONF.set_override('sysfs_rbd_root', host.sysfs_root,
                          group=opts.GROUP)
        meter = Meter()
        # warm-up (imports, first lock files), not measured
        measure_sequential(host, meter, 1, args.mode)
        host.set_latency(args.latency_ms)
        sequential = measure_sequential(host, meter, args.rounds, args.mode)
        concurrent_walls = measure_concurrent(host, args.concurrent,
                                              args.mode)
    finally:
        host.cleanUp()
        shutil.rmtree(workdir, ignore_errors=True)

    print('os-brick-cas control-plane benchmark -- SIMULATED host (stand-in '
          'casadm/rbd sleeping %.0f ms per command), %s cache, udev rule %s;'
          ' host layout %s; not hardware figures' % (
              args.latency_ms, args.mode,
              'simulated' if args.udev_rule
              else 'absent (connector makes links)',
              'with the per-mode defaults' if args.host_layout
              else 'absent'))
    for step in ('attach', 'detach'):
        plain = sequential['plain']['calls'][step]
        cached = sequential['cached']['calls'][step]
        print('privileged calls per %s: plain krbd %d, cached %d (+%d)' % (
            step, len(plain), len(cached), len(cached) - len(plain)))
        print('    plain : %s' % ', '.join(plain))
        print('    cached: %s' % ', '.join(cached))
    for kind in ('plain', 'cached'):
        print('Python time per attach / detach (%s, median of %d, wall '
              'minus subprocess): %.2f ms / %.2f ms, of which privsep file '
              'writes %.2f ms / %.2f ms' % (
                  kind, args.rounds, sequential[kind]['python_attach_ms'],
                  sequential[kind]['python_detach_ms'],
                  sequential[kind]['files_attach_ms'],
                  sequential[kind]['files_detach_ms']))
    ratio = (concurrent_walls['cached']['wall_s'] /
             concurrent_walls['plain']['wall_s'])
    print('%d concurrent attaches + detaches: plain %.2f s, cached %.2f s, '
          'ratio %.2f' % (args.concurrent,
                          concurrent_walls['plain']['wall_s'],
                          concurrent_walls['cached']['wall_s'], ratio))
    for kind in ('plain', 'cached'):
        one = sequential[kind]['wall_s']
        wall = concurrent_walls[kind]['wall_s']
        print('    %-6s: %d x %.3f s sequential = %.2f s; concurrent %.2f s '
              '(speed-up %.1fx); stand-in processes used %.1f CPU-s on %d '
              'CPUs' % (kind, args.concurrent, one, args.concurrent * one,
                        wall, args.concurrent * one / wall,
                        concurrent_walls[kind]['stand_in_cpu_s'],
                        os.cpu_count() or 1))
    added = len(sequential['cached']['calls']['attach']) - len(
        sequential['plain']['calls']['attach'])
    print('targets: +<=2 privileged calls per attach: %s (+%d); <5 ms '
          'Python per attach: %s (%.2f ms); concurrent ratio <=1.5: %s '
          '(%.2f)' % (
              'met' if added <= 2 else 'NOT met', added,
              'met' if sequential['cached']['python_attach_ms'] < 5
              else 'NOT met', sequential['cached']['python_attach_ms'],
              'met' if ratio <= 1.5 else 'NOT met', ratio))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
