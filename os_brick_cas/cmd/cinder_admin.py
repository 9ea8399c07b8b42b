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

"""Operator verbs that ask Cinder: cache-mode types, fences, owners.

Wired into ``os-brick-cas`` as ``type-create``, ``type-show``,
``fence-show``, ``fence-clear``, ``discard``, ``recover`` and ``owners``.
Credentials come from the usual client configuration
(:mod:`os_brick_cas.cmd.cinder_session`); fence commands need an admin.
The extra specs are checked by :mod:`cinder_ext.extra_specs`, the one
contract module of cinder_ext that imports nothing of cinder.
"""

import argparse
import sys
from typing import Any, Callable, Optional

from cinder_ext import extra_specs
from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import args as args_mod
from os_brick_cas.cmd.checks import owners as owner_checks
from os_brick_cas.cmd import cinder_session
from os_brick_cas.cmd import commands
from os_brick_cas.cmd import output
from os_brick_cas import discard as discard_mod
from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import modes
from os_brick_cas import recover as recover_mod
from os_brick_cas import report


def type_specs(mode: str, backend: Optional[str]) -> dict[str, str]:
    """The extra specs of a cache-mode volume type (validated)."""
    specs = {extra_specs.CACHEABLE: extra_specs.TRUE,
             extra_specs.CACHE_MODE: mode}
    if backend:
        specs['volume_backend_name'] = backend
    extra_specs.validate(specs)
    return specs


def _find_type(client: Any, name: str) -> Any:
    for volume_type in client.volume_types.list(is_public=None):
        if volume_type.name == name:
            return volume_type
    raise SystemExit('volume type %r not found' % name)


def type_create(args: argparse.Namespace) -> int:
    try:
        specs = type_specs(args.mode, args.backend)
    except extra_specs.ExtraSpecError as exc:
        print('refused: %s' % exc, file=sys.stderr)
        return 1
    client = cinder_session.cinder()
    volume_type = client.volume_types.create(
        args.name, description='Open CAS %s cache on the compute host'
        % args.mode, is_public=not args.private)
    volume_type.set_keys(specs)
    print('created volume type %s (%s) with %s' % (
        args.name, volume_type.id, ', '.join(
            '%s=%s' % item for item in sorted(specs.items()))))
    return 0


def type_show(args: argparse.Namespace) -> int:
    volume_type = _find_type(cinder_session.cinder(), args.name)
    specs = volume_type.get_keys()
    problem, spec = None, None
    try:
        spec = extra_specs.validate(specs)
    except extra_specs.ExtraSpecError as exc:
        problem = str(exc)
    lines = ['%s = %s' % item for item in sorted(specs.items())]
    if problem:
        lines.append('INVALID: %s' % problem)
    else:
        lines.append('cache: %s' % (('mode %s%s' % (
            spec.mode, ' (holds dirty data on the host)'
            if spec.holds_dirty_data else '')) if spec.cacheable else 'none'))
    document = {'name': args.name, 'id': volume_type.id,
                'extra_specs': dict(specs), 'valid': problem is None,
                'problem': problem,
                'cache_mode': spec.mode if spec and spec.cacheable else None,
                'holds_dirty_data': bool(spec and spec.cacheable and
                                         spec.holds_dirty_data)}
    output.emitter(args)(document, ('key', 'value'),
                         lambda: sorted(specs.items()),
                         lambda: ''.join(line + '\n' for line in lines))
    return 1 if problem else 0


def fence_show(args: argparse.Namespace) -> int:
    client = fence.FenceClient(cinder_session.cinder())
    owner = client.owner(args.volume)
    lost = client.lost(args.volume)
    lines = ['volume %s: %s' % (args.volume, 'fenced by host %s%s' % (
        owner.host, ' (attachment %s)' % owner.epoch if owner.epoch else '')
        if owner else 'not fenced')]
    lines += ['  declared lost: host %s attachment %s' % (
        item.host, item.epoch or '(not recorded)') for item in lost]
    document = {'volume_id': args.volume,
                'fenced_by': owner.host if owner else None,
                'attachment': owner.epoch if owner else None,
                'declared_lost': [{'host': item.host,
                                   'attachment': item.epoch}
                                  for item in lost]}
    output.emitter(args)(
        document, ('volume_id', 'state', 'host', 'attachment'),
        lambda: ([(args.volume, 'fenced', owner.host, owner.epoch)]
                 if owner else []) + [(args.volume, 'declared lost',
                                       item.host, item.epoch)
                                      for item in lost],
        lambda: ''.join(line + '\n' for line in lines))
    return 0


def fence_clear(args: argparse.Namespace) -> int:
    client = fence.FenceClient(cinder_session.cinder())
    owner = client.owner(args.volume)
    if not owner:
        print('volume %s is not fenced; nothing to do' % args.volume)
        return 0
    host = owner.host
    if not args.host_lost:
        print('volume %s is fenced by host %s, whose Open CAS cache may hold '
              'writes that Ceph does not have. Detach it cleanly on %s. Only '
              'if that host is lost for good (its cached writes with it), '
              'rerun with --host-lost.' % (args.volume, host, host),
              file=sys.stderr)
        return 1
    # only the owner shown above is declared lost, not one that took the
    # marker over meanwhile
    if not _cleared(client, args.volume, owner, lost=True):
        return 1
    print('fence of volume %s (host %s) cleared; writes cached only on %s '
          'are lost' % (args.volume, host, host))
    return 0


def _cleared(client: fence.FenceClient, volume_id: str,
             owner: fence.Owner, lost: bool = False) -> bool:
    """Clear the marker if it still names *owner*; say so otherwise."""
    try:
        client.clear(volume_id, lost=lost, expect=owner)
    except exception.FenceConflict as exc:
        print('refused: %s' % exc, file=sys.stderr)
        return False
    return True


def discard(args: argparse.Namespace) -> int:
    """Drop this host's stale cached data of a volume declared lost."""
    client = fence.FenceClient(cinder_session.cinder())
    lost = [owner.epoch for owner in client.lost(args.volume)
            if owner.epoch]
    outcome = discard_mod.discard(args.volume, lost, args.yes,
                                  casadm_mod.Casadm())
    print(outcome.message)
    return 0 if outcome.done else 1


def recover(args: argparse.Namespace) -> int:
    """Flush an orphaned core whose attachment Cinder still names."""
    client = fence.FenceClient(cinder_session.cinder())
    owner = client.owner(args.volume)
    if owner is None or owner.host != args.host:
        print('refused: the fence marker of volume %s names %s, not this '
              'host (%s): the data cached here is not the newest there is '
              '(see "os-brick-cas discard").' % (
                  args.volume, 'host %s' % owner.host if owner else
                  'no host', args.host), file=sys.stderr)
        return 1
    outcome = recover_mod.recover(args.volume, owner.epoch, args.rbd_user,
                                  casadm_mod.Casadm())
    print(outcome.message)
    if not outcome.done:
        return 1
    return 0 if _cleared(client, args.volume, owner) else 1


OWNER_COLUMNS = ('volume_id', 'cache_id', 'core_id', 'state', 'dirty_blocks',
                 'attachment', 'cinder_owner', 'verdict')


def owners(args: argparse.Namespace,
           emit: Callable[..., None]) -> int:
    """Each core here: its volume, dirty blocks, attachment, Cinder owner."""
    client = fence.FenceClient(cinder_session.cinder())
    rows = []
    for cache in report.host_report(casadm_mod.Casadm()):
        for core in cache.cores:
            if not core.volume_id:
                continue
            try:
                judged = owner_checks.judge(client, core, args.host)
            except owner_checks.Unreachable as exc:
                print('os-brick-cas owners: %s' % (
                    owner_checks.UNREACHABLE % exc), file=sys.stderr)
                return 1
            rows.append((core.volume_id, core.cache_id, core.core_id,
                         core.status, core.dirty_blocks, core.attachment,
                         judged.owner_label if judged.owner else None,
                         judged.verdict))
    emit({'host': args.host, 'volumes': [
        dict(zip(OWNER_COLUMNS, row)) for row in rows]}, OWNER_COLUMNS,
        lambda: rows)
    return 0


class Owners(commands.HostReport):
    """cached volumes here and who Cinder's fence marker names as owner

    For each cached volume here: dirty blocks, the attachment this host
    caches and who Cinder's fence marker names as owner now, with what to
    do.
    """

    report = staticmethod(owners)


def register_subcommands(subparsers: Any) -> None:
    """Add the verbs of this module (owners is a cliff command)."""
    create = subparsers.add_parser(
        'type-create', help='create a cache-mode volume type')
    create.add_argument('name')
    create.add_argument('--mode', required=True, choices=modes.ALL_MODES)
    create.add_argument('--backend', help='volume_backend_name to pin')
    create.add_argument('--private', action='store_true')
    create.set_defaults(func=type_create)
    show = subparsers.add_parser('type-show',
                                 help='show and validate a volume type')
    show.add_argument('name')
    show.set_defaults(func=type_show)
    fshow = subparsers.add_parser('fence-show',
                                  help="show a volume's fence marker")
    fshow.add_argument('volume')
    fshow.set_defaults(func=fence_show)
    fclear = subparsers.add_parser(
        'fence-clear', help="clear a volume's fence marker (admin)")
    fclear.add_argument('volume')
    fclear.add_argument('--host-lost', action='store_true',
                        help='confirm the fenced host and its cached '
                             'writes are lost')
    fclear.set_defaults(func=fence_clear)
    drop = subparsers.add_parser(
        'discard', help="drop this host's stale cached data of a volume "
                        "whose owner was declared lost (fence-clear "
                        "--host-lost); the only command that drops dirty "
                        "data")
    drop.add_argument('--volume', required=True, metavar='ID')
    drop.add_argument('--yes', action='store_true',
                      help='confirm: drop the data')
    drop.set_defaults(func=discard)
    rec = subparsers.add_parser(
        'recover', help='flush and remove the core of a volume whose '
                        'server is gone while this host still owns its '
                        'newest data (fence marker), then clear the marker')
    rec.add_argument('--volume', required=True, metavar='ID')
    args_mod.add_host_argument(rec)
    rec.add_argument('--rbd-user', default='cinder',
                     help='Ceph user for rbd map (default: %(default)s)')
    rec.set_defaults(func=recover)
