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

"""``os-brick-cas drain`` / ``undrain``: write-back without dirty data."""

import argparse
import sys
import time
from typing import Any

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas import opts
from os_brick_cas import report

CONF = cfg.CONF


def add_parser(subparsers: Any) -> None:
    drain = subparsers.add_parser(
        'drain', help="flush a volume's dirty data and keep it from getting "
                      'dirty again (its writes go straight to Ceph) until '
                      'undrain')
    drain.add_argument('--volume', metavar='ID', required=True,
                       help='Cinder volume id (or POOL/IMAGE)')
    drain.add_argument('--timeout', type=int, default=None,
                       help='seconds for the flush (default: [os_brick_cas] '
                            'flush_timeout)')
    drain.set_defaults(func=run_drain)
    undrain = subparsers.add_parser(
        'undrain', help='let a drained volume cache its writes again')
    undrain.add_argument('--volume', metavar='ID', required=True,
                         help='Cinder volume id (or POOL/IMAGE)')
    undrain.set_defaults(func=run_undrain)


def _find(casadm: casadm_mod.Casadm, volume: str):
    for cache in casadm.list_caches():
        for core in cache.cores:
            if volume in report.rbd_image_of(core.device):
                return cache, core
    raise SystemExit('volume %s is not cached on this host' % volume)


def run_drain(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    timeout = args.timeout or CONF[opts.GROUP].flush_timeout
    try:
        cache, core = _find(casadm, args.volume)
        if not core.active:
            print('volume %s: core %d of instance %d is inactive; attach '
                  'the volume first' % (args.volume, core.core_id,
                                        cache.cache_id), file=sys.stderr)
            return 1
        before = casadm.dirty_blocks(core)
        start = time.monotonic()
        drain_mod.DrainManager(casadm).drain(cache, core, timeout)
        print('volume %s drained in %.1fs (%d dirty blocks flushed); its '
              'writes go straight to Ceph until "os-brick-cas undrain"'
              % (args.volume, time.monotonic() - start, before))
        return 0
    except exception.CasError as exc:
        print('os-brick-cas drain: %s' % exc, file=sys.stderr)
        return 1


def run_undrain(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    try:
        cache, core = _find(casadm, args.volume)
        drain_mod.DrainManager(casadm).undrain(cache, core, core.core_id)
    except exception.CasError as exc:
        print('os-brick-cas undrain: %s' % exc, file=sys.stderr)
        return 1
    print('volume %s undrained: writes are cached again' % args.volume)
    return 0
