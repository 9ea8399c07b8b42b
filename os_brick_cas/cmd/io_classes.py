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

"""``os-brick-cas reload-io-classes``: the table the volumes should have.

The repair doctor's "shares" check names: composes each instance's
IO-class table again from its volumes' shares (as their types asked) and
drains (kept exactly), under the instance lock a drain takes, and loads
it if it differs. One line per instance; exit 1 if any failed.
"""

import argparse
import sys
from typing import Any

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import deadline as deadline_mod
from os_brick_cas import exception
from os_brick_cas import io_class_reload
from os_brick_cas import labels
from os_brick_cas import opts

CONF = cfg.CONF
VERB = 'reload-io-classes'


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        VERB, help="load each cache instance's IO-class table as its "
                   "volumes' cache shares and drains should have it (drains "
                   'stay as they are)')
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--cache-id', type=int, metavar='ID',
                       help='one cache instance')
    which.add_argument('--all', action='store_true',
                       help='every cache instance with cores on this host')
    parser.set_defaults(func=run)


def describe(result: io_class_reload.Reloaded) -> str:
    """One line saying what the reload of one instance did."""
    said = ('loaded the composed table' if result.changed
            else 'the table was already right')
    if result.unshared:
        said += ('; still without a class for want of ids or percent '
                 '(newest first): %s' % ', '.join(
                     labels.core(result.cache_id, core_id)
                     for core_id in result.unshared))
    return 'cache instance %d: %s' % (result.cache_id, said)


def run(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    try:
        caches = casadm.list_caches()
    except exception.CasError as exc:
        print('os-brick-cas %s: %s' % (VERB, exc), file=sys.stderr)
        return 1
    ids = ([cache.cache_id for cache in caches if cache.cores] if args.all
           else [args.cache_id])
    failed = 0
    for cache_id in ids:
        limit = deadline_mod.Deadline(CONF[opts.GROUP].lock_timeout +
                                      CONF[opts.GROUP].casadm_timeout)
        try:
            result = io_class_reload.reload_table(casadm, cache_id, limit)
        except exception.CasError as exc:
            failed += 1
            print('cache instance %d: NOT reloaded: %s' % (cache_id, exc),
                  file=sys.stderr, flush=True)
            continue
        print(describe(result), flush=True)
    if not ids:
        print('os-brick-cas %s: no cache instance with cores on this host'
              % VERB)
    return 1 if failed else 0
