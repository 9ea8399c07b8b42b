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

"""``os-brick-cas flush``: write cached dirty data back to Ceph.

For host maintenance: flush one volume or every core of the write-back and
write-only instances, each bounded by a timeout, with progress (percent,
MiB/s, ETA). A failed or timed-out flush leaves the data in the cache
(Open CAS keeps it dirty) and the command exits 1; Ctrl-C stops it with
exit 130 and says how much is still dirty (nothing is lost).
"""

import argparse
import os
import sys
import time
from typing import Any, Optional, TextIO

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import args as args_mod
from os_brick_cas.cmd import drain as drain_cmd
from os_brick_cas.cmd import progress
from os_brick_cas import events
from os_brick_cas import exception
from os_brick_cas import lifecycle
from os_brick_cas import locks
from os_brick_cas import modes
from os_brick_cas import opts
from os_brick_cas import rbd_names
from os_brick_cas import report

CONF = cfg.CONF


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'flush', help='flush dirty data of one volume or all volumes')
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument('--volume', metavar='ID',
                        help='Cinder volume id (or POOL/IMAGE)')
    target.add_argument('--all', action='store_true',
                        help='every core of every write-back/write-only '
                             'instance')
    parser.add_argument('--timeout', type=int, default=None,
                        help='seconds per core (default: [os_brick_cas] '
                             'flush_timeout)')
    parser.add_argument('--progress', action='store_true',
                        help='print percent, MiB/s and ETA every second '
                             'even when stdout is not a terminal (on a '
                             'terminal it always does)')
    args_mod.add_host_argument(parser)
    parser.set_defaults(func=run)


class Interrupted(Exception):
    """Ctrl-C during a flush; the message states the data left dirty."""


def _targets(reports: list[report.CacheReport], volume: Optional[str]
             ) -> list[report.CoreReport]:
    if volume:
        core = report.find_volume_core(reports, volume)
        if core is None:
            raise SystemExit('volume %s is not cached on this host' % volume)
        return [core]
    return [core for cache in reports
            if modes.CacheMode(cache.mode).holds_dirty_data
            for core in cache.cores]


def flush_cores(casadm: casadm_mod.Casadm, cores: list[report.CoreReport],
                timeout: int, out: Optional[TextIO] = None,
                show_progress: Optional[bool] = None,
                cinder: Optional[lifecycle.Cinder] = None) -> list[str]:
    """Flush each core in turn; return one error line per failure.

    Progress is shown on a terminal, or always with *show_progress*. With
    *cinder*, a dirty core whose volume's marker names another owner is
    refused (its blocks may be older than Ceph's).
    """
    out = out or sys.stdout
    if show_progress is None:
        show_progress = out.isatty()
    failures = []
    for number, core in enumerate(cores, 1):
        label = core.volume_id or core.core_device
        prefix = '[%d/%d] volume %s (cache %d core %d)' % (
            number, len(cores), label, core.cache_id, core.core_id)
        if core.status == 'Inactive':
            failures.append('%s: inactive, its device is missing; attach or '
                            'detach the volume to flush it' % prefix)
            print('%s: SKIPPED (inactive)' % prefix, file=out)
            continue
        before = casadm.dirty_blocks(core.core)
        print('%s: %d dirty blocks, flushing (timeout %ds)...' % (
            prefix, before, timeout), file=out, flush=True)
        start = time.monotonic()
        try:
            # os_brick_cas_flush_seconds: timed by the flush in place
            _flush_one(casadm, core, timeout, before, prefix, out,
                       show_progress, cinder)
        except (exception.FlushFailed, exception.FlushTimedOut,
                exception.TransitionRefused, exception.LockTimedOut,
                exception.NotDataOwner) as exc:
            failures.append('%s: %s' % (prefix, failure_text(exc, timeout)))
            elapsed = time.monotonic() - start
            print('%s: FAILED after %.1fs' % (prefix, elapsed), file=out)
            continue
        after = casadm.dirty_blocks(core.core)
        print('%s: done in %.1fs, %d dirty blocks left' % (
            prefix, time.monotonic() - start, after), file=out)
    return failures


def failure_text(exc: Exception, timeout: int) -> str:
    """Why a core was not flushed, with what to do from this command.

    A timeout is this command's ``--timeout`` (nova's ``flush_timeout``
    only bounds detaches), so that is what to raise.
    """
    if isinstance(exc, exception.FlushTimedOut):
        return ('not flushed within %ds; its dirty data stays in the cache '
                '(nothing lost): run the flush again with a larger '
                '--timeout' % timeout)
    return str(exc)


def _flush_one(casadm: casadm_mod.Casadm, core: report.CoreReport,
               timeout: int, before: int, prefix: str, out: TextIO,
               show_progress: bool,
               cinder: Optional[lifecycle.Cinder] = None) -> None:
    spec = rbd_names.parse_link_name(os.path.basename(core.core_device))

    def flush() -> None:
        if spec is None:
            # not a core os-brick-cas added: no volume to check
            with locks.cache_lock(core.cache_id), events.timed(events.FLUSH):
                casadm.flush(core.cache_id, core.core_id, timeout)
            return
        # the connector's flush in place (nova's), with the CLI's view of
        # the owner
        lifecycle.Lifecycle(casadm).flush_in_place(
            lifecycle.Volume(spec, core.volume_id),
            lifecycle.owner_epoch_now(cinder, core.volume_id)
            if cinder is not None else None, timeout)
    try:
        if show_progress and before:
            progress.watch(flush, lambda: casadm.dirty_blocks(core.core),
                           before, prefix, out, out.isatty())
        else:
            flush()
    except KeyboardInterrupt:
        # casadm got the same SIGINT and stops; what it wrote is in Ceph
        raise Interrupted('interrupted: %s dirty blocks remain on %s '
                          '(volume %s), nothing lost: they stay in the '
                          'cache until a flush or detach writes them to '
                          'Ceph' % (_dirty_now(casadm, core), core.label,
                                    core.volume_id or core.core_device))


def _dirty_now(casadm: casadm_mod.Casadm, core: report.CoreReport) -> str:
    try:
        return str(casadm.dirty_blocks(core.core))
    except exception.CasError:
        return 'some'


def run(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    timeout = args.timeout or CONF[opts.GROUP].flush_timeout
    try:
        cores = _targets(report.host_report(casadm), args.volume)
        if not cores:
            print('os-brick-cas flush: end state: nothing to flush: no '
                  'cores in write-back/write-only instances')
            return 0
        failures = flush_cores(casadm, cores, timeout,
                               show_progress=args.progress or None,
                               cinder=drain_cmd.cinder_view(args.host))
    except exception.CasError as exc:
        print('os-brick-cas flush: %s' % exc, file=sys.stderr)
        return 1
    except Interrupted as exc:
        print('os-brick-cas flush: %s' % exc, file=sys.stderr)
        return args_mod.EXIT_INTERRUPTED
    for line in failures:
        print('ERROR %s' % line, file=sys.stderr)
    if failures:
        print('os-brick-cas flush: end state: %d of %d core(s) NOT flushed; '
              'their dirty data is still in the cache' % (
                  len(failures), len(cores)), file=sys.stderr)
        return 1
    print('os-brick-cas flush: end state: %d core(s) flushed' % len(cores))
    return 0
