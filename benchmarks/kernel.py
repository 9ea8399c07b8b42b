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

"""Figures from the real kernel: real Open CAS on real krbd, in the guest.

Runs inside the real-kernel guest (Debian's kernel under qemu, the Open
CAS module built from a release tarball, brd RAM disks as cache devices,
krbd over the guest's one-node loopback memstore Ceph), set up by the
kernel runner::

    tools/run-kernel-tests.sh --bench [--runtime 10] [--repeat 3]
        [--rounds 3] [--dirty 0,1024,4096,8192]

and prints, through the product's CachedRBDConnector and DrainManager:

* fio 4k randread QD1 and QD16 on plain krbd and on a fresh wt core
  (run #1 cold, later runs warm; the read hit ratio of each run), and
  randwrite QD1 on krbd, wt and wb;
* drain time (``DrainManager.drain``: IO-class load + bounded flush)
  against the dirty 4 KiB blocks written through /dev/casX-Y, with the
  instance's cleaning policy nop, alru and acp;
* the wall time of each command (casadm, rbd, udevadm) of an attach and a
  detach, timed at the process boundary.

With ``--rounds N`` everything is measured N times and the summary gives
the spread (min-max). Results: RESULTS/bench.json and bench.txt. On the
host, ``python benchmarks/kernel.py plot RESULTS/bench.json DIR`` draws
DIR/kernel-bench.png (``bench --plot``'s figure) and DIR/kernel-drain.png
(needs matplotlib). Every figure is from a TCG guest on a small shared
machine over loopback memstore Ceph: ratios and shapes, not hardware
figures.
"""

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, Optional
import uuid

from oslo_concurrency import processutils
from oslo_config import cfg

from os_brick_cas import bench
from os_brick_cas import benchplot
from os_brick_cas.cmd import bench as bench_cmd
from os_brick_cas import connector as cas_connector
from os_brick_cas import opts

import drain as drain_bench   # benchmarks/drain.py

CONF = cfg.CONF
POOL = drain_bench.POOL
OPENCAS_CONF = '/etc/opencas/opencas.conf'
#: cache id -> (mode, brd device) of the guest's instances
CACHES = {1: ('wt', '/dev/ram0'), 2: ('wb', '/dev/ram1')}
WB_CACHE = 2
LABEL = ('real-kernel guest: qemu TCG (no KVM), 2 vCPUs on a 2-core host '
         'shared with other work, brd cache, krbd over loopback memstore '
         'Ceph -- ratios and shapes, not hardware figures')
MIB = 2 ** 20


def run(*argv: str) -> str:
    """Run a guest tool; its stdout, or RuntimeError with its stderr."""
    done = subprocess.run(list(argv), capture_output=True, text=True,
                          timeout=600)
    if done.returncode:
        raise RuntimeError('%s failed (%d): %s%s' % (
            ' '.join(argv), done.returncode, done.stdout, done.stderr))
    return done.stdout


# -- timing the commands of an attach/detach ---------------------------------

def _command_name(cmd: tuple[Any, ...]) -> str:
    """``casadm --add-core``, ``rbd map``: the tool and its verb."""
    words = [str(word) for word in cmd]
    wrappers = ('env', 'sudo', 'nice', 'ionice', 'timeout')
    while words and os.path.basename(words[0]) in wrappers:
        words = words[1:]
    tool = os.path.basename(words[0]) if words else '?'
    verb = next((word for word in words[1:] if word.startswith('-') and
                 word not in ('--script', '-o', '--output-format')), '')
    if tool != 'casadm':
        verb = next((word for word in words[1:]
                     if not word.startswith('-')), '')
    return ('%s %s' % (tool, verb)).strip()


@contextlib.contextmanager
def timed_commands() -> Iterator[list[tuple[str, float]]]:
    """Record ``(command, seconds)`` of every processutils.execute call."""
    calls: list[tuple[str, float]] = []
    real_execute = processutils.execute

    def execute(*cmd: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return real_execute(*cmd, **kwargs)
        finally:
            calls.append((_command_name(cmd), time.perf_counter() - start))

    processutils.execute = execute
    try:
        yield calls
    finally:
        processutils.execute = real_execute


class Host(object):
    """The guest's caches, images and the product's connector."""

    def __init__(self, ceph_conf: str, port: str, workdir: str,
                 pool: str = POOL, rbd_user: Optional[str] = None):
        """The guest's Ceph (*rbd_user* None) or a real cluster's client.

        The guest's: admin, no auth, the monitor on *port*; a real one's
        monitors and keyring come from *ceph_conf*.
        """
        self.ceph_conf = ceph_conf
        self.port = port
        self.workdir = workdir
        self.pool = pool
        self.rbd_user = rbd_user
        self.connector = cas_connector.CachedRBDConnector(
            None, do_local_attach=True)
        #: {'op', 'mode', 'total', 'calls': [(command, seconds)]}
        self.control: list[dict[str, Any]] = []

    def start_caches(self) -> None:
        for cache_id, (mode, device) in sorted(CACHES.items()):
            run('casadm', '-S', '-i', str(cache_id), '-d', device, '-c', mode,
                '--force')
            run('casadm', '-X', '-n', 'seq-cutoff', '-i', str(cache_id),
                '-p', 'never')
            self.cleaning(cache_id, 'nop')
        lines = ['version=19.3.0', '[caches]']
        lines += ['%d\t%s\t%s' % (cache_id, device, mode.upper())
                  for cache_id, (mode, device) in sorted(CACHES.items())]
        os.makedirs(os.path.dirname(OPENCAS_CONF), exist_ok=True)
        with open(OPENCAS_CONF, 'w') as conf_file:
            conf_file.write('\n'.join(lines + ['[cores]']) + '\n')
        for name, value in (
                ('cache_instances', {mode: str(cache_id) for
                                     cache_id, (mode, _) in CACHES.items()}),
                ('opencas_conf', OPENCAS_CONF), ('lock_path', self.workdir),
                ('state_path', self.workdir), ('flush_timeout', 300),
                ('casadm_timeout', 60)):
            CONF.set_override(name, value, group=opts.GROUP)

    @staticmethod
    def cleaning(cache_id: int, policy: str) -> None:
        run('casadm', '-X', '-n', 'cleaning', '-i', str(cache_id), '-p',
            policy)

    def stop_caches(self) -> None:
        for cache_id in sorted(CACHES):
            subprocess.run(['casadm', '-T', '-i', str(cache_id), '-n'],
                           capture_output=True, timeout=120)

    def image(self, label: str, size_mb: int, fill_mb: int = 0) -> str:
        """A new image; its first *fill_mb* MiB written by librbd."""
        name = 'volume-bench-%s-%s' % (label, uuid.uuid4().hex[:6])
        self.rbd('create', '%s/%s' % (self.pool, name), '--size',
                 '%dM' % size_mb)
        if fill_mb:
            self.rbd('bench', '--io-type', 'write', '--io-size', '1M',
                     '--io-threads', '4', '--io-pattern', 'seq',
                     '--io-total', '%dM' % fill_mb,
                     '%s/%s' % (self.pool, name))
        return name

    def rbd(self, *args: str) -> str:
        """The rbd CLI on this host's cluster, as its client."""
        user = ['--id', self.rbd_user] if self.rbd_user else []
        return run('rbd', '-c', self.ceph_conf, *user, *args)

    def props(self, image: str, mode: Optional[str]) -> dict[str, Any]:
        """Connection properties of *image*; *mode* None: not cacheable."""
        if self.rbd_user is None:
            return drain_bench.props(image, mode, self.port)
        # monitors and keyring from the host's ceph.conf, as nova's
        # compute nodes find them
        props: dict[str, Any] = {
            'name': '%s/%s' % (self.pool, image), 'hosts': [], 'ports': [],
            'auth_username': self.rbd_user, 'auth_enabled': True,
            'cluster_name': 'ceph', 'volume_id': image}
        if mode is not None:
            props.update(cacheable=True, cache_mode=mode)
        return props

    def attach(self, image: str, mode: Optional[str], note: str = ''
               ) -> tuple[dict[str, Any], str]:
        props = self.props(image, mode)
        with timed_commands() as calls:
            start = time.perf_counter()
            device = self.connector.connect_volume(props)
            total = time.perf_counter() - start
        self.control.append({'op': 'attach', 'mode': (mode or 'krbd') + note,
                             'total': total, 'calls': calls})
        return props, device['path']

    def detach(self, props: dict[str, Any], path: str, note: str = ''
               ) -> None:
        with timed_commands() as calls:
            start = time.perf_counter()
            self.connector.disconnect_volume(props, {'path': path})
            total = time.perf_counter() - start
        self.control.append({'op': 'detach', 'mode': (
            props.get('cache_mode') or 'krbd') + note, 'total': total,
            'calls': calls})
        # memstore keeps every written byte in the OSD's RAM: a full OSD
        # blocks writes (and so flushes) of later rounds
        self.rbd('rm', props['name'])


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    return {key: dataclasses.asdict(value) if dataclasses.is_dataclass(value)
            else value for key, value in item.items()}


def measure_fio(host: Host, args: argparse.Namespace,
                emit: Callable[[str], None]) -> list[dict[str, Any]]:
    """randread QD1/QD16 (krbd vs fresh wt core), randwrite QD1."""
    size = '%dM' % args.fio_mb
    profiles = {profile.name: profile for profile in bench.PROFILES}
    results: list[dict[str, Any]] = []
    plain_image = host.image('krbd', args.fio_mb * 2, args.fio_mb)
    plain = host.attach(plain_image, None)
    try:
        for name in ('randread-qd1', 'randread-qd16'):
            image = host.image('wt-read', args.fio_mb * 2, args.fio_mb)
            props, path = host.attach(image, 'wt')   # fresh core: cold
            devices = [('krbd', plain[1]), ('cas-wt', path)]
            try:
                # runs #1..N: the cache warming up under random reads
                for item in bench_cmd.run_profiles(
                        devices, [profiles[name]], args.runtime, size,
                        args.repeat):
                    item['phase'] = 'cold' if item['run'] == 1 else 'warming'
                    results.append(item)
                # then every line of the range read once: run #N+1 warm
                run('dd', 'if=%s' % path, 'of=/dev/null', 'bs=1M',
                    'count=%d' % args.fio_mb, 'iflag=direct')
                for item in bench_cmd.run_profiles(
                        devices, [profiles[name]], args.runtime, size):
                    item.update(profile='%s #%d' % (name, args.repeat + 1),
                                run=args.repeat + 1, phase='warm')
                    results.append(item)
            finally:
                host.detach(props, path)
        wt = host.attach(host.image('wt-write', args.fio_mb * 2), 'wt')
        wb = host.attach(host.image('wb-write', args.fio_mb * 2), 'wb')
        try:
            results += bench_cmd.run_profiles(
                [('krbd', plain[1]), ('cas-wt', wt[1]), ('cas-wb', wb[1])],
                [profiles['randwrite-qd1']], args.runtime, size, 1)
        finally:
            host.detach(*wt)
            host.detach(*wb, note=' (dirty: flush)')
    finally:
        host.detach(*plain)
    for label_pair in (('krbd', 'cas-wt'), ('cas-wt', 'cas-wb')):
        rows = [item for item in results if item['device'] in label_pair]
        emit(bench.render_table(rows, list(label_pair)).rstrip())
    for item in results:
        if item.get('read') and item.get('read_hit_ratio') is not None:
            emit('read hit ratio %s %s: %.1f%%' % (
                item['profile'], item['device'],
                100 * item['read_hit_ratio']))
    return [_plain(item) for item in results]


def measure_drain(host: Host, args: argparse.Namespace,
                  emit: Callable[[str], None]) -> list[dict[str, Any]]:
    """Drain time against dirty blocks, per cleaning policy."""
    rows = []
    span_mb = max(args.dirty) * drain_bench.BLOCK // MIB + 16
    for policy in args.policies:
        host.cleaning(WB_CACHE, policy)
        props, path = host.attach(host.image('drain', span_mb), 'wb')
        try:
            core = drain_bench.Bench(path, 300)
            for blocks in args.dirty:
                core.undrain()
                start = time.perf_counter()
                if blocks:
                    drain_bench.write_blocks(path, list(range(blocks)),
                                             chunk_blocks=256)
                write_s = time.perf_counter() - start
                dirty_before = core.dirty()
                seconds = core.drain()
                row = {'policy': policy, 'written': blocks,
                       'write_s': write_s, 'dirty_before': dirty_before,
                       'seconds': seconds, 'dirty_after': core.dirty()}
                rows.append(row)
                emit('drain policy=%(policy)s written=%(written)d '
                     'dirty_before=%(dirty_before)d seconds=%(seconds).3f '
                     'dirty_after=%(dirty_after)d' % row)
            core.undrain()
        finally:
            host.detach(props, path)
    host.cleaning(WB_CACHE, 'nop')
    return rows


def measure_control(host: Host, args: argparse.Namespace) -> None:
    """*args.attaches* clean attach + detach cycles per mode."""
    for mode in ('wt', 'wb', None):
        for _ in range(args.attaches):
            image = host.image('control', 16)
            host.detach(*host.attach(image, mode))


def _spread(values: list[float], fmt: str = '%.1f') -> str:
    low, high = min(values), max(values)
    if fmt % low == fmt % high:
        return fmt % low
    return (fmt + '-' + fmt) % (low, high)


def control_table(control: list[dict[str, Any]]) -> str:
    """Per op/mode: total and each command, median [min-max] ms."""
    per_key: dict[tuple[str, str], list[dict[str, Any]]] = (
        collections.defaultdict(list))
    for item in control:
        per_key[(item['op'], item['mode'])].append(item)
    lines = ['%-8s %-18s %-26s %5s %9s %15s' % (
        'op', 'mode', 'command', 'calls', 'median ms', 'min-max ms')]
    for (op, mode), items in sorted(per_key.items()):
        totals = [item['total'] * 1000 for item in items]
        lines.append('%-8s %-18s %-26s %5d %9.0f %15s' % (
            op, mode, 'TOTAL (connector)', len(items),
            statistics.median(totals), _spread(totals, '%.0f')))
        by_command: dict[str, list[float]] = collections.defaultdict(list)
        order: list[str] = []
        for item in items:
            for command, seconds in item['calls']:
                if command not in by_command:
                    order.append(command)
                by_command[command].append(seconds * 1000)
        for command in order:
            values = by_command[command]
            lines.append('%-8s %-18s %-26s %5.1f %9.0f %15s' % (
                '', '', command, len(values) / len(items),
                statistics.median(values), _spread(values, '%.0f')))
    lines.append('calls = commands per %s (average); times are wall time of '
                 'each command as the connector ran it' % 'operation')
    return '\n'.join(lines)


def summary(rounds: list[dict[str, Any]]) -> str:
    """Spread (min-max) of each fio and drain figure over the rounds."""
    lines = ['fio: avg us / P99 us / IOPS, min-max over %d round(s)'
             % len(rounds)]
    fio: dict[tuple[str, str, str], list[dict[str, Any]]] = (
        collections.OrderedDict())
    for result in rounds:
        for item in result['fio']:
            for direction in ('read', 'write'):
                if item.get(direction):
                    fio.setdefault((item['profile'], direction,
                                    item['device']), []).append(
                        dict(item[direction],
                             hit=item.get('read_hit_ratio')))
    for (profile, direction, device), values in fio.items():
        hits = [v['hit'] * 100 for v in values
                if v['hit'] is not None and direction == 'read']
        lines.append('  %-18s %-5s %-7s %13s %15s %13s%s' % (
            profile, direction, device,
            _spread([v['avg_us'] for v in values]),
            _spread([v['p99_us'] for v in values if v['p99_us']] or [0]),
            _spread([v['iops'] for v in values], '%.0f'),
            '  hit %s%%' % _spread(hits, '%.0f') if hits else ''))
    lines.append('drain: seconds (dirty blocks at drain start), min-max')
    drains: dict[tuple[str, int], list[dict[str, Any]]] = (
        collections.OrderedDict())
    for result in rounds:
        for row in result['drain']:
            drains.setdefault((row['policy'], row['written']), []).append(row)
    for (policy, written), rows in drains.items():
        lines.append('  %-5s written %6d: %s s (dirty %s)' % (
            policy, written, _spread([r['seconds'] for r in rows], '%.2f'),
            _spread([r['dirty_before'] for r in rows], '%.0f')))
    control = [item for result in rounds for item in result['control']]
    lines.append(control_table(control))
    return '\n'.join(lines)


def opencas_version() -> str:
    """``casadm -V -o csv`` on one line (module and CLI versions)."""
    return run('casadm', '-V', '-o', 'csv').strip().replace('\n', '; ')


def run_guest(args: argparse.Namespace) -> int:
    results_dir = args.results or os.environ.get(
        'OS_BRICK_CAS_KERNEL_RESULTS')
    ceph_conf = os.environ.get('OS_BRICK_CAS_KERNEL_CEPH_CONF')
    if os.environ.get('OS_BRICK_CAS_KERNEL_GUEST') != '1' or not ceph_conf:
        print('runs only inside the real-kernel guest: '
              'tools/run-kernel-tests.sh --bench', file=sys.stderr)
        return 2
    from tests.kernel import base as kernel_base   # the guest's checkout
    report, emit = drain_bench.start_report()
    port = kernel_base.mon_port()
    version = opencas_version()
    where = '%s; kernel %s; %s' % (LABEL, os.uname().release, version)
    emit('os-brick-cas real-kernel benchmark -- %s' % where)
    rounds = []
    started = time.monotonic()
    for number in range(1, args.rounds + 1):
        workdir = tempfile.mkdtemp(prefix='os-brick-cas-kbench-')
        host = Host(ceph_conf, port, workdir)
        host.start_caches()
        emit('== round %d of %d' % (number, args.rounds))
        try:
            fio = measure_fio(host, args, emit) if 'fio' in args.parts else []
            drains = (measure_drain(host, args, emit)
                      if 'drain' in args.parts else [])
            measure_control(host, args)
        finally:
            host.stop_caches()
        rounds.append({'fio': fio, 'drain': drains,
                       'control': host.control})
        save(results_dir, {'where': where, 'runtime_s': args.runtime,
                           'repeat': args.repeat, 'fio_mb': args.fio_mb,
                           'rounds': rounds}, report)
    emit('== summary (%d round(s), %.0f s)' % (
        len(rounds), time.monotonic() - started))
    emit(summary(rounds))
    save(results_dir, {'where': where, 'runtime_s': args.runtime,
                       'repeat': args.repeat, 'fio_mb': args.fio_mb,
                       'rounds': rounds}, report)
    return 0


def save(results_dir: Optional[str], data: dict[str, Any],
         report: list[str], name: str = 'bench') -> None:
    """NAME.json and NAME.txt so far (kept if a later round fails)."""
    if not results_dir:
        return
    with open(os.path.join(results_dir, name + '.json'), 'w') as out:
        json.dump(data, out, indent=1)
    with open(os.path.join(results_dir, name + '.txt'), 'w') as out:
        out.write('\n'.join(report) + '\n')


# -- figures (on the host, with matplotlib) ----------------------------------

def _directions(item: dict[str, Any]) -> dict[str, Any]:
    return {key: bench.Direction(**value)
            if key in ('read', 'write') and value else value
            for key, value in item.items()}


def run_plot(args: argparse.Namespace) -> int:
    with open(args.json) as source:
        data = json.load(source)
    os.makedirs(args.directory, exist_ok=True)
    where = 'real Open CAS + krbd, TCG guest, loopback memstore Ceph'
    fio = [_directions(item) for item in data['rounds'][0]['fio']]
    if fio:
        benchplot.plot(fio, os.path.join(args.directory, 'kernel-bench.png'),
                       where + ' (round 1)')
    rows = [row for result in data['rounds'] for row in result['drain']]
    if rows:
        benchplot.plot_drain(rows, os.path.join(args.directory,
                                                'kernel-drain.png'), where)
    return 0


def command_line(doc: str, outputs: str,
                 run: Callable[[argparse.Namespace], int],
                 plot: Callable[[argparse.Namespace], int],
                 plot_help: str) -> tuple[argparse.ArgumentParser,
                                          argparse.ArgumentParser]:
    """A benchmark's parser: ``run`` (in the guest) and ``plot`` (host).

    Returns the parser and the ``run`` sub-parser, for the benchmark's
    own options; ``parser.parse_args(argv).func(args)`` runs the command.
    """
    parser = argparse.ArgumentParser(description=doc.split('\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    guest = sub.add_parser('run', help='measure (inside the guest)')
    guest.add_argument('--results', help='write %s here (default: '
                       '$OS_BRICK_CAS_KERNEL_RESULTS)' % outputs)
    guest.set_defaults(func=run)
    drawing = sub.add_parser('plot', help=plot_help)
    drawing.add_argument('json')
    drawing.add_argument('directory')
    drawing.set_defaults(func=plot)
    return parser, guest


def main(argv: list[str]) -> int:
    parser, guest = command_line(__doc__, 'bench.json/bench.txt', run_guest,
                                 run_plot, 'draw the PNGs (on the host)')
    guest.add_argument('--runtime', type=int, default=10,
                       help='fio seconds per run (default 10)')
    guest.add_argument('--repeat', type=int, default=3,
                       help='randread runs per core: #1 cold, then warm '
                            '(default 3)')
    guest.add_argument('--rounds', type=int, default=1,
                       help='measure everything this many times (spread)')
    guest.add_argument('--fio-mb', type=int, default=16,
                       help='fio range in MiB (fits the 64 MiB brd cache)')
    guest.add_argument('--dirty', type=drain_bench.parse_sizes,
                       default=[0, 1024, 4096, 8192],
                       help='dirty 4 KiB blocks to drain')
    guest.add_argument('--policies', type=lambda text: text.split(','),
                       default=['nop', 'alru', 'acp'])
    guest.add_argument('--attaches', type=int, default=3,
                       help='extra clean attach/detach cycles per mode')
    guest.add_argument('--parts', type=lambda text: text.split(','),
                       default=['fio', 'drain'])
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
