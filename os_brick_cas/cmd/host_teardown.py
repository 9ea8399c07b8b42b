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

"""``os-brick-cas host stop|forget``: take the host's cache instances down.

``stop`` flushes (bounded) and stops each instance of the host layout that
runs and drops the opencas.conf rows of those it stopped; ``forget`` drops
the rows of instances that no longer run once their device holds no dirty
metadata (a host being dismantled, e.g. devstack's clean). The work is
:mod:`os_brick_cas.host.teardown`'s. One line per instance (``-f value -c
cache_id -c result`` for scripts). Exit codes: 0 every instance done,
2 at least one kept (its line says why and what to run).
"""

import argparse
import sys
from typing import Any, Callable

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import output
from os_brick_cas import exception
from os_brick_cas.host import layout_file
from os_brick_cas.host import teardown as host_teardown
from os_brick_cas import opts

CONF = cfg.CONF
COLUMNS = ('cache_id', 'mode', 'result', 'detail')


def add_parser(subparsers: Any) -> None:
    """Register ``host stop`` and ``host forget`` under ``host``."""
    parser = subparsers.add_parser(
        'host', help='take the cache instances of the host layout down')
    verbs = parser.add_subparsers(dest='host_command', required=True)
    stop = verbs.add_parser(
        'stop', help='flush and stop the instances of the host layout; an '
                     'instance whose flush fails keeps running')
    stop.add_argument('--flush-timeout', type=int, default=None,
                      metavar='SECONDS',
                      help='bound of each flush and of each stop '
                           '(default: [os_brick_cas] flush_timeout)')
    stop.add_argument('--with-cores', action='store_true',
                      help='also stop instances that still have cores '
                           '(volumes attached to servers that are shut '
                           'off), flushed first; without it such an '
                           'instance is kept')
    stop.set_defaults(func=run_stop)
    forget = verbs.add_parser(
        'forget', help="drop the opencas.conf rows of the layout's stopped "
                       'instances whose devices hold no dirty metadata')
    forget.set_defaults(func=run_forget)


def _report(args: argparse.Namespace, verb: str,
            work: Callable[[casadm_mod.Casadm, layout_file.HostLayout],
                           list[host_teardown.Outcome]]) -> int:
    try:
        layout = layout_file.load(CONF[opts.GROUP].host_layout)
        outcomes = work(casadm_mod.Casadm(), layout)
    except exception.CasError as exc:
        print('os-brick-cas host %s: %s. Nothing was changed.' % (verb, exc),
              file=sys.stderr)
        return 2
    code = 2 if any(outcome.kept for outcome in outcomes) else 0
    for outcome in outcomes:
        if outcome.kept:
            print('REFUSED %s' % outcome, file=sys.stderr)
    document = {'layout': layout.path, 'exit_code': code,
                'instances': [{'cache_id': o.cache_id, 'mode': o.mode,
                               'result': o.result, 'detail': o.detail}
                              for o in outcomes]}
    output.emitter(args)(
        document, COLUMNS,
        lambda: [(o.cache_id, o.mode, o.result, o.detail) for o in outcomes],
        lambda: ''.join('%s\n' % o for o in outcomes))
    return code


def run_stop(args: argparse.Namespace) -> int:
    timeout = args.flush_timeout or CONF[opts.GROUP].flush_timeout
    return _report(args, 'stop', lambda casadm, layout: host_teardown.stop(
        casadm, layout, timeout, with_cores=args.with_cores))


def run_forget(args: argparse.Namespace) -> int:
    return _report(args, 'forget', host_teardown.forget)
