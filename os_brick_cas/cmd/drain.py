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
import math
import sys
import time
from typing import Any, Optional

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import args as args_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import opts
from os_brick_cas import ownership
from os_brick_cas import report

CONF = cfg.CONF
#: instance modes whose cores can hold dirty data (the ones --all drains)
DIRTY_MODES = ('wb', 'wo')

Target = tuple[casadm_mod.CacheInstance, casadm_mod.Core]

DRAIN_TIMEOUT_HELP = (
    'overall bound in seconds for the flushes of all volumes together '
    '(default: [os_brick_cas] flush_timeout times the number of volumes); '
    'each volume gets the time still left. So the command ends within '
    'TIMEOUT seconds plus a few casadm calls per volume (each bounded by '
    'casadm_timeout) and the wait for instance locks (lock_timeout). A '
    'volume whose flush does not finish stays drained with its dirty data '
    'in the cache and is reported as failed.')


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


def tell_cinder(core: casadm_mod.Core, host: str, drained: bool) -> None:
    """Record a drain (or its end) in the volume's fence marker.

    Needs Cinder credentials (OS_CLOUD/OS_*); without them the drain
    still holds here and Cinder keeps refusing snapshots. A drain is
    recorded only for the owner the marker names; the end of one is
    refused while the marker names another host (from then on this core
    could get dirty behind its back).
    """
    from os_brick_cas.cmd import doctor
    _image, volume_id = report.rbd_image_of(core.device)
    client, problem = doctor.owner_client()
    if problem:
        raise exception.CasError(message='cannot ask Cinder (%s); nothing '
                                         'changed' % problem)
    if client is None or volume_id is None:
        print('volume %s: Cinder not told (no credentials: set OS_CLOUD); '
              'it keeps refusing snapshots of it' % label(core))
        return
    record = ownership.read(core.device)
    epoch = record.epoch if record else None
    try:
        if drained:
            if not fence.may_record_drain(client.owner(volume_id), host,
                                          epoch):
                print('volume %s: Cinder not told: its fence marker does '
                      'not name this host (%s) and the attachment cached '
                      'here' % (volume_id, host))
                return
            client.set(volume_id, host, epoch, drained=True)
        else:
            other = client.take(volume_id, host, epoch)
            if other is not None:
                raise exception.CasError(
                    message='its fence marker names host %s, not this host '
                            '(%s): undrain refused (the volume stays '
                            'drained, nothing is lost). Detach it here if '
                            'it runs elsewhere now.' % (other.host, host))
    except exception.CasError:
        raise
    except Exception as exc:
        raise exception.CasError(message='cannot read or update the fence '
                                         'marker (%s); nothing changed'
                                         % exc)
    print('volume %s: Cinder records it as %s' % (
        volume_id, 'drained (snapshots and backups allowed)' if drained
        else 'cached by this host'), flush=True)


def label(core: casadm_mod.Core) -> str:
    """The volume id of a core, else its image, else its device."""
    image, volume_id = report.rbd_image_of(core.device)
    return volume_id or image or core.device


def _find(caches: list[casadm_mod.CacheInstance], volume: str) -> Target:
    for cache in caches:
        for core in cache.cores:
            if volume in report.rbd_image_of(core.device):
                return cache, core
    raise SystemExit('volume %s is not cached on this host' % volume)


def _dirty_instances(caches: list[casadm_mod.CacheInstance]
                     ) -> list[casadm_mod.CacheInstance]:
    return [cache for cache in caches if cache.current_mode in DIRTY_MODES]


def _finish(verb: str, failed: list[str], total: int) -> int:
    if not failed:
        return 0
    print('os-brick-cas %s: %d of %d volume(s) failed: %s; the others are '
          'done. Fix the cause shown above and run it again for those.'
          % (verb, len(failed), total, ', '.join(failed)), file=sys.stderr)
    return 1


def _drain_one(manager: drain_mod.DrainManager, target: Target,
               deadline: float, host: str) -> None:
    """Drain one volume within what is left of the overall bound."""
    cache, core = target
    name = label(core)
    if not core.active:
        raise exception.CasError(
            message='core %d of instance %d is inactive; attach the volume '
                    'first' % (core.core_id, cache.cache_id))
    left = math.floor(deadline - time.monotonic())
    if left < 1:
        raise exception.CasError(
            message='not attempted: the overall time bound ran out')
    before = manager.casadm.dirty_blocks(core)
    print('volume %s: draining %d dirty blocks (core %d of instance %d, at '
          'most %ds)' % (name, before, core.core_id, cache.cache_id, left),
          flush=True)
    start = time.monotonic()
    manager.drain(cache, core, left)
    print('volume %s drained in %.1fs (%d dirty blocks flushed); its writes '
          'go straight to Ceph until "os-brick-cas undrain"'
          % (name, time.monotonic() - start, before), flush=True)
    tell_cinder(core, host, drained=True)


def run_drain(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    try:
        caches = casadm.list_caches()
    except exception.CasError as exc:
        print('os-brick-cas drain: %s' % exc, file=sys.stderr)
        return 1
    targets: list[Target]
    if args.all:
        targets = []
        for cache in _dirty_instances(caches):
            for core in cache.cores:
                if core.active:
                    targets.append((cache, core))
                else:
                    print('volume %s: core %d of instance %d is inactive, '
                          'not drained (attach or detach the volume to '
                          'flush it)' % (label(core), core.core_id,
                                         cache.cache_id), file=sys.stderr)
        if not targets:
            print('no active volume of a write-back or write-only instance '
                  'on this host: nothing to drain')
            return 0
    else:
        targets = [_find(caches, args.volume)]
    bound: int = args.timeout or (CONF[opts.GROUP].flush_timeout *
                                  len(targets))
    deadline = time.monotonic() + bound
    manager = drain_mod.DrainManager(casadm)
    failed = []
    for target in targets:
        try:
            _drain_one(manager, target, deadline, args.host)
        except exception.CasError as exc:
            failed.append(label(target[1]))
            print('volume %s: NOT drained: %s' % (label(target[1]), exc),
                  file=sys.stderr, flush=True)
    return _finish('drain', failed, len(targets))


def run_undrain(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    manager = drain_mod.DrainManager(casadm)
    try:
        caches = casadm.list_caches()
        if args.all:
            targets = []
            for cache in _dirty_instances(caches):
                drained = drain_mod.drained_cores(
                    casadm.list_io_classes(cache.cache_id))
                targets += [(cache, core) for core in cache.cores
                            if core.core_id in drained]
        else:
            targets = [_find(caches, args.volume)]
    except exception.CasError as exc:
        print('os-brick-cas undrain: %s' % exc, file=sys.stderr)
        return 1
    if not targets:
        print('no drained volume on this host: nothing to undrain')
        return 0
    failed = []
    for cache, core in targets:
        error: Optional[exception.CasError] = None
        try:
            # the marker first: from the undrain on, the core can get dirty
            tell_cinder(core, args.host, drained=False)
            manager.undrain(cache, core, core.core_id)
        except exception.CasError as exc:
            error = exc
        if error is None:
            print('volume %s undrained: writes are cached again'
                  % label(core), flush=True)
        else:
            failed.append(label(core))
            print('volume %s: NOT undrained: %s' % (label(core), error),
                  file=sys.stderr, flush=True)
    return _finish('undrain', failed, len(targets))
