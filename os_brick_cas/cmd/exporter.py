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

"""``os-brick-cas exporter``: Prometheus metrics of this host's caches."""

import argparse
import logging as std_logging
import ssl
import sys
import time
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas.metrics import exporter
from os_brick_cas.metrics import opts

CONF = cfg.CONF
LOG = logging.getLogger(__name__)
#: a service: its start (listen address) is logged without -v
SERVICE_LOGGERS = ('os_brick_cas.metrics', __name__)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'exporter',
        help='Prometheus metrics per cache instance and cached volume',
        description='Serve Prometheus metrics of the Open CAS caches and '
                    'the volumes they cache on http://LISTEN_ADDRESS:'
                    'LISTEN_PORT/metrics ([%s] options), or write them '
                    'to a file for node_exporter\'s textfile collector. '
                    'Runs as root (it calls casadm).' % opts.GROUP)
    parser.add_argument(
        '--textfile', metavar='PATH',
        help='write the metrics to PATH (a file ending in .prom in '
             'node_exporter\'s --collector.textfile.directory) instead of '
             'serving HTTP; the file is replaced atomically')
    parser.add_argument(
        '--interval', type=float, metavar='SECONDS',
        help='with --textfile: rewrite the file every SECONDS instead of '
             'once (without it, run the command from a timer)')
    parser.set_defaults(func=run)


def _log_as_a_service() -> None:
    """INFO for the exporter's own lines (start, listen address)."""
    for name in SERVICE_LOGGERS:
        logger = std_logging.getLogger(name)
        if not logger.isEnabledFor(std_logging.INFO):
            logger.setLevel(std_logging.INFO)


def _textfile(path: str, interval: float) -> int:
    registry = exporter.build_registry(CONF)
    if interval:
        LOG.info('os-brick-cas metrics written to %s every %g s', path,
                 interval)
    while True:
        try:
            exporter.write_textfile(path, registry)
        except OSError as exc:
            print('os-brick-cas exporter: cannot write %s: %s (check that '
                  'its directory exists and is writable)' % (path, exc),
                  file=sys.stderr)
            return 1
        if not interval:
            return 0
        time.sleep(interval)


def run(args: argparse.Namespace) -> int:
    if args.interval is not None and not args.textfile:
        print('os-brick-cas exporter: --interval needs --textfile',
              file=sys.stderr)
        return 2
    if args.textfile:
        if args.interval:
            _log_as_a_service()
        return _textfile(args.textfile, args.interval or 0)
    _log_as_a_service()
    group = CONF[opts.GROUP]
    try:
        server, thread = exporter.start_http(CONF)
    except ValueError as exc:
        print('os-brick-cas exporter: %s' % exc, file=sys.stderr)
        return 2
    except ssl.SSLError as exc:
        print('os-brick-cas exporter: cannot use the TLS files of [%s]: %s'
              % (opts.GROUP, exc), file=sys.stderr)
        return 1
    except OSError as exc:
        print('os-brick-cas exporter: cannot listen on %s:%s: %s (set '
              '[%s] listen_address/listen_port to a free local address)'
              % (group.listen_address, group.listen_port, exc, opts.GROUP),
              file=sys.stderr)
        return 1
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()
    return 0
