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
write-only instances, each bounded by a timeout, with progress. A failed
or timed-out flush leaves the data in the cache (Open CAS keeps it dirty)
and the command exits 1.
"""

import argparse
import sys
import time
from typing import Any, Optional, TextIO

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas import opts
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
    parser.set_defaults(func=run)


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
                timeout: int, out: Optional[TextIO] = None) -> list[str]:
    """Flush each core in turn; return one error line per failure."""
    out = out or sys.stdout
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
            casadm.flush(core.cache_id, core.core_id, timeout)
        except (exception.FlushFailed, exception.FlushTimedOut) as exc:
            failures.append('%s: %s' % (prefix, exc))
            elapsed = time.monotonic() - start
            print('%s: FAILED after %.1fs' % (prefix, elapsed), file=out)
            continue
        after = casadm.dirty_blocks(core.core)
        print('%s: done in %.1fs, %d dirty blocks left' % (
            prefix, time.monotonic() - start, after), file=out)
    return failures


def run(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    timeout = args.timeout or CONF[opts.GROUP].flush_timeout
    try:
        cores = _targets(report.host_report(casadm), args.volume)
        if not cores:
            print('os-brick-cas flush: end state: nothing to flush: no '
                  'cores in write-back/write-only instances')
            return 0
        failures = flush_cores(casadm, cores, timeout)
    except exception.CasError as exc:
        print('os-brick-cas flush: %s' % exc, file=sys.stderr)
        return 1
    for line in failures:
        print('ERROR %s' % line, file=sys.stderr)
    if failures:
        print('os-brick-cas flush: end state: %d of %d core(s) NOT flushed; '
              'their dirty data is still in the cache' % (
                  len(failures), len(cores)), file=sys.stderr)
        return 1
    print('os-brick-cas flush: end state: %d core(s) flushed' % len(cores))
    return 0
