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

"""``os-brick-cas status``: cache instances and the volumes they cache."""

import argparse
import dataclasses
import sys
from typing import Callable, Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd.checks import owners as owner_checks
from os_brick_cas.cmd import commands
from os_brick_cas.cmd import config
from os_brick_cas.cmd import output
from os_brick_cas import exception
from os_brick_cas import policy as policy_mod
from os_brick_cas import report

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def configured_instances() -> dict[int, str]:
    """cache id -> mode from [os_brick_cas] cache_instances (may be {})."""
    try:
        policy = policy_mod.CachePolicy.from_conf(CONF)
    except exception.CasError:
        return {}
    return {cache_id: mode.value
            for mode, cache_id in policy.instances.items()}


def _num(value: Optional[float]) -> str:
    return '-' if value is None else str(value)


CACHE_HEADER = ('CACHE', 'MODE', 'STATE', 'DEVICE', 'OFFERED', 'OCCUPANCY',
                'DIRTY', 'READ HIT')
CORE_HEADER = ('CORE', 'VOLUME', 'DEVICE', 'STATE', 'DIRTY', 'READ HIT',
               'WRITE HIT', 'RBD')


def render_table(reports: list[report.CacheReport],
                 owners: Optional[dict[str, str]] = None,
                 offered_known: bool = True, raw: bool = False) -> str:
    """Human-readable status, one block per cache instance.

    *owners* maps volume id to what Cinder's owner record says of the
    data cached here (see :func:`owner_lines`), when Cinder was asked.
    Dirty data is in human units, in 4 KiB blocks with *raw*; columns are
    as wide as their longest cell (by-id paths are long).
    """
    owners = owners or {}
    if not reports:
        return 'No Open CAS cache instances are running on this host.\n'
    cache_rows = [CACHE_HEADER] + [(
        cache.cache_id, cache.mode, cache.status, cache.device,
        cache.configured_mode or ('no' if offered_known else '?'),
        '-' if cache.occupancy_percent is None else
        '%.1f%%' % cache.occupancy_percent,
        output.dirty(cache.dirty_blocks, raw),
        report.percent(cache.read_hit_ratio)) for cache in reports]
    core_rows = [CORE_HEADER] + [(
        core.core_id, core.volume_id or '(not a Cinder volume)',
        core.exported or '-', core.status,
        output.dirty(core.dirty_blocks, raw),
        report.percent(core.read_hit_ratio),
        report.percent(core.write_hit_ratio),
        core.rbd_device or core.core_device)
        for cache in reports for core in cache.cores]
    # one width per column over every block, so the blocks line up too
    cache_lines = output.align(cache_rows, right=(5, 6, 7))
    core_lines = output.align(core_rows, right=(4, 5, 6), indent='  ')
    lines = []
    next_core = 1
    for number, cache in enumerate(reports, 1):
        lines += [cache_lines[0], cache_lines[number]]
        if cache.cores:
            lines.append(core_lines[0])
        for core in cache.cores:
            lines.append(core_lines[next_core])
            next_core += 1
            if core.attachment:
                lines.append('        attachment %s' % core.attachment)
            if core.volume_id in owners:
                lines.append('        owner: %s' % owners[core.volume_id])
            if core.drained:
                lines.append('        drained: writes go straight to Ceph '
                             '(os-brick-cas undrain)')
            share = share_line(core, raw)
            if share:
                lines.append('        ' + share)
            for holder in core.held_by:
                lines.append('        held open by %s' % holder)
        lines.append('')
    lines.append('DIRTY is %s not yet written to Ceph.' % (
        'in 4 KiB blocks' if raw else 'the data (--raw: in 4 KiB blocks)'))
    return '\n'.join(lines) + '\n'


def share_line(core: report.CoreReport, raw: bool = False
               ) -> Optional[str]:
    """The core's cache share: asked, held (or why not), use against cap."""
    if core.share_asked is None and core.share_held is None:
        return None
    asked = ('asked %d%%' % core.share_asked if core.share_asked is not None
             else 'no ask recorded')
    if core.share_held is not None:
        return 'share: %s, holds %d%%: %s of %s cap, %s dirty' % (
            asked, core.share_held,
            output.dirty(core.share_occupancy_blocks, raw),
            output.dirty(core.share_cap_blocks, raw),
            output.dirty(core.share_dirty_blocks, raw))
    if core.drained:
        return 'share: %s, held back while drained (undrain restores it)' % (
            asked)
    return ('share: %s, holds NONE: the IO-class budget of instance %d is '
            'spent (cached uncapped in class 0; see "os-brick-cas doctor")'
            % (asked, core.cache_id))


def owner_lines(reports: list[report.CacheReport], host: str
                ) -> tuple[dict[str, str], Optional[str]]:
    """(volume id -> Cinder's owner and verdict, why Cinder was not asked).

    Keystone or Cinder down is said once, not a traceback.
    """
    client, problem = owner_checks.owner_client()
    if client is None:
        return {}, problem
    found = {}
    for cache in reports:
        for core in cache.cores:
            if core.volume_id:
                try:
                    judged = owner_checks.judge(client, core, host)
                except owner_checks.Unreachable as exc:
                    return found, str(exc)
                found[core.volume_id] = '%s (Cinder: %s)' % (
                    judged.verdict, judged.owner_label)
    return found, None


#: one row per core (``-f value``/``csv``/``-c``)
COLUMNS = ('cache_id', 'core_id', 'volume_id', 'state', 'dirty_blocks',
           'device', 'drained', 'mode', 'read_hit_ratio', 'write_hit_ratio',
           'dirty_bytes', 'share_asked', 'share_held',
           'share_occupancy_blocks', 'share_dirty_blocks',
           'share_cap_blocks')


def _rows(reports: list[report.CacheReport]) -> list[tuple]:
    """One row per core, :data:`COLUMNS` (exact numbers, for scripts)."""
    return [(core.cache_id, core.core_id, core.volume_id or '-',
             core.status, _num(core.dirty_blocks), core.exported or '-',
             core.drained, cache.mode, _num(core.read_hit_ratio),
             _num(core.write_hit_ratio), _num(_bytes(core.dirty_blocks)),
             _num(core.share_asked), _num(core.share_held),
             _num(core.share_occupancy_blocks),
             _num(core.share_dirty_blocks), _num(core.share_cap_blocks))
            for cache in reports for core in cache.cores]


def _bytes(blocks: Optional[int]) -> Optional[int]:
    return None if blocks is None else blocks * output.BLOCK_BYTES


def run(args: argparse.Namespace, emit: Callable[..., None]) -> int:
    configured = configured_instances()
    try:
        reports = report.host_report(casadm_mod.Casadm(), configured)
        owners, problem = owner_lines(reports, args.host)
    except exception.CasError as exc:
        print('os-brick-cas status: %s' % exc, file=sys.stderr)
        return 1
    files = config.files_read(CONF)
    notes = []
    if not configured:
        notes.append('no configuration found; pass --config-file (files '
                     'read: %s): OFFERED is unknown'
                     % (', '.join(files) or 'none'))
    if problem:
        notes.append('owners not shown: %s' % owner_checks.UNREACHABLE
                     % problem)
    document = {'host': args.host, 'config_files': files,
                'configured': bool(configured), 'notes': notes,
                'caches': [dataclasses.asdict(r) for r in reports]}
    for cache in document['caches']:
        if not configured:
            cache['configured_mode'] = None
        cache['dirty_bytes'] = _bytes(cache['dirty_blocks'])
        for core in cache['cores']:
            core['owner'] = owners.get(core['volume_id'])
            core['dirty_bytes'] = _bytes(core['dirty_blocks'])
    for note in notes:
        print('os-brick-cas status: %s' % note, file=sys.stderr)
    emit(document, COLUMNS, lambda: _rows(reports),
         lambda: _header(args.host, files) + render_table(
             reports, owners, offered_known=bool(configured),
             raw=args.raw))
    return 0


def _header(host: str, files: list[str]) -> str:
    return 'host %s; configuration read from: %s\n\n' % (
        host, ', '.join(files) or 'no file')


class Status(commands.HostReport):
    """cache instances, cached volumes, dirty data, hits"""

    report = staticmethod(run)
