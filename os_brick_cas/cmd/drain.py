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

"""``os-brick-cas drain`` / ``undrain``: write-back without dirty data.

``--volume ID`` or ``--all`` (every core of the host's write-back and
write-only instances). One line per volume as it goes; a volume that fails
does not stop the others, and the exit code is 1 if any failed.
"""

import argparse
import os
import sys
import time
from typing import Any

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import args as args_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas import lifecycle
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from os_brick_cas import rbd_names
from os_brick_cas import report

CONF = cfg.CONF
#: instance modes whose cores can hold dirty data (the ones --all drains)
DIRTY_MODES = ('wb', 'wo')

Target = tuple[casadm_output.CacheInstance, casadm_output.Core]

DRAIN_TIMEOUT_HELP = (
    'overall bound in seconds for all volumes together, lock waits and '
    'flushes included (default: [os_brick_cas] flush_timeout times the '
    'number of volumes, plus casadm_timeout per volume); each volume gets '
    'the time still left, and one whose turn comes after it is not '
    'attempted. So the command ends within TIMEOUT seconds plus the casadm '
    'call running then (bounded by casadm_timeout). A volume whose flush '
    'does not finish stays drained with its dirty data in the cache and is '
    'reported as failed.')


def _selection(parser: argparse.ArgumentParser, verb: str) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--volume', metavar='ID',
                       help='Cinder volume id (or POOL/IMAGE)')
    which.add_argument('--all', action='store_true',
                       help='every %s volume of the write-back and '
                            'write-only instances on this host' % verb)


def add_parser(subparsers: Any) -> None:
    drain = subparsers.add_parser(
        'drain', help="flush a volume's dirty data and keep it from getting "
                      'dirty again (its writes go straight to Ceph) until '
                      'undrain')
    _selection(drain, 'active')
    drain.add_argument('--timeout', type=int, default=None,
                       help=DRAIN_TIMEOUT_HELP)
    args_mod.add_host_argument(drain)
    drain.set_defaults(func=run_drain)
    undrain = subparsers.add_parser(
        'undrain', help='let a drained volume cache its writes again')
    _selection(undrain, 'drained')
    args_mod.add_host_argument(undrain)
    undrain.set_defaults(func=run_undrain)


def cinder_view(host: str) -> lifecycle.Cinder:
    """Cinder as this command reaches it (OS_CLOUD/OS_* credentials)."""
    from os_brick_cas.cmd import doctor
    client, problem = doctor.owner_client()
    if client is None and problem is None:
        problem = 'no credentials: set OS_CLOUD or OS_AUTH_URL'
    return lifecycle.Cinder(host, client, problem=problem)


def subject(core: casadm_output.Core) -> lifecycle.Volume:
    """The life-cycle subject of *core*, if os-brick-cas named its link."""
    spec = rbd_names.parse_link_name(os.path.basename(core.device))
    if spec is None:
        raise exception.CasError(
            message='%s is not a link os-brick-cas names (a 1.x core?); '
                    'detach and attach the volume first' % core.device)
    _image, volume_id = report.rbd_image_of(core.device)
    return lifecycle.Volume(spec, volume_id)


def label(core: casadm_output.Core) -> str:
    """The volume id of a core, else its image, else its device."""
    image, volume_id = report.rbd_image_of(core.device)
    return volume_id or image or core.device


def _find(caches: list[casadm_output.CacheInstance], volume: str) -> Target:
    for cache in caches:
        for core in cache.cores:
            if report.names_volume(core.device, volume):
                return cache, core
    raise SystemExit('volume %s is not cached on this host' % volume)


def _dirty_instances(caches: list[casadm_output.CacheInstance]
                     ) -> list[casadm_output.CacheInstance]:
    return [cache for cache in caches if cache.current_mode in DIRTY_MODES]


def _finish(verb: str, done: str, failed: list[str], total: int) -> int:
    """Report the end state on the last line; 0 only if all are *done*."""
    if not failed:
        print('os-brick-cas %s: end state: %d of %d volume(s) %s'
              % (verb, total, total, done), flush=True)
        return 0
    print('os-brick-cas %s: end state: %d of %d volume(s) NOT %s: %s; the '
          'others are %s. Fix the cause shown above and run it again for '
          'those.' % (verb, len(failed), total, done, ', '.join(failed),
                      done), file=sys.stderr, flush=True)
    return 1


def _drain_one(machine: lifecycle.Lifecycle, target: Target,
               limit: lifecycle.Deadline, cinder: lifecycle.Cinder) -> None:
    """Drain one volume within what is left of the overall bound."""
    cache, core = target
    name = label(core)
    if not core.active:
        raise exception.CasError(
            message='%s is inactive (after a reboot?) and may hold dirty '
                    'data; attach the volume on this host (or detach it: '
                    'the detach flushes it) first' % core.label)
    left = limit.whole_seconds('the drain')
    print('volume %s: draining %d dirty blocks (%s, at most %ds)' % (
        name, machine.casadm.dirty_blocks(core), core.label, left),
        flush=True)
    start = time.monotonic()
    result = machine.drain(subject(core), cinder, limit)
    print('volume %s drained in %.1fs (%d dirty blocks flushed); its writes '
          'go straight to Ceph until "os-brick-cas undrain"'
          % (name, time.monotonic() - start, result.dirty_before),
          flush=True)
    if result.recorded:
        print('volume %s: Cinder records it as drained (snapshots and '
              'backups allowed)' % name, flush=True)
    else:
        print('volume %s: Cinder not told (%s); it keeps refusing '
              'snapshots of it' % (name, result.why_not_recorded),
              flush=True)


def undrain_needs_cinder(cinder: lifecycle.Cinder, count: int) -> str:
    """The warning a drain without Cinder gives before it starts.

    Draining without Cinder is safe (it only writes dirty data to Ceph), so
    it goes on; but the undrain that ends the maintenance must tell Cinder
    first and refuses until it can.
    """
    return ('os-brick-cas drain: warning: Cinder cannot be told (%s); the '
            '%d volume(s) will be drained, but "os-brick-cas undrain" that '
            'ends the maintenance refuses until it can reach Cinder: set '
            'OS_CLOUD (clouds.yaml) or source an admin openrc before you '
            'undrain' % (cinder.problem or 'no credentials', count))


def run_drain(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    try:
        caches = casadm.list_caches()
    except exception.CasError as exc:
        print('os-brick-cas drain: %s' % exc, file=sys.stderr)
        print('os-brick-cas drain: end state: unknown (casadm failed)',
              file=sys.stderr)
        return 1
    targets: list[Target]
    if args.all:
        # inactive cores too: they may hold dirty data and count as not
        # drained, never as "nothing to drain"
        targets = [(cache, core) for cache in _dirty_instances(caches)
                   for core in cache.cores]
        if not targets:
            print('os-brick-cas drain: end state: no volume of a write-back '
                  'or write-only instance on this host: nothing to drain')
            return 0
    else:
        targets = [_find(caches, args.volume)]
    group = CONF[opts.GROUP]
    bound: int = args.timeout or ((group.flush_timeout +
                                   group.casadm_timeout) * len(targets))
    # one bound for all volumes, lock waits included
    limit = lifecycle.Deadline(bound)
    machine = lifecycle.Lifecycle(casadm)
    cinder = cinder_view(args.host)
    if cinder.client is None and cinder.in_use:
        print(undrain_needs_cinder(cinder, len(targets)), file=sys.stderr,
              flush=True)
    failed = []
    for target in targets:
        try:
            _drain_one(machine, target, limit, cinder)
        except exception.CasError as exc:
            failed.append(label(target[1]))
            print('volume %s: NOT drained: %s' % (label(target[1]), exc),
                  file=sys.stderr, flush=True)
    return _finish('drain', 'drained', failed, len(targets))


def run_undrain(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    machine = lifecycle.Lifecycle(casadm)
    try:
        caches = casadm.list_caches()
        if args.all:
            targets = []
            for cache in _dirty_instances(caches):
                drained = drain_mod.drained_cores(
                    casadm.list_io_classes(cache.cache_id))
                targets += [(cache, core) for core in cache.cores
                            if core.core_id in drained or
                            lifecycle.state(casadm, subject(core).spec) in (
                                lifecycle.DRAINING, lifecycle.UNDRAINING)]
        else:
            targets = [_find(caches, args.volume)]
    except exception.CasError as exc:
        print('os-brick-cas undrain: %s' % exc, file=sys.stderr)
        print('os-brick-cas undrain: end state: unknown (casadm failed)',
              file=sys.stderr)
        return 1
    if not targets:
        print('os-brick-cas undrain: end state: no drained volume on this '
              'host: nothing to undrain')
        return 0
    cinder = cinder_view(args.host)
    limit = lifecycle.deadline()
    failed = []
    for _cache, core in targets:
        try:
            # Cinder first (compare-and-swap), then the core; refused if
            # Cinder cannot be told
            machine.undrain(subject(core), cinder, limit)
        except exception.CasError as exc:
            failed.append(label(core))
            print('volume %s: NOT undrained: %s' % (label(core), exc),
                  file=sys.stderr, flush=True)
            continue
        print('volume %s undrained: Cinder records it as cached by this '
              'host, and writes are cached again' % label(core), flush=True)
    return _finish('undrain', 'caching', failed, len(targets))
