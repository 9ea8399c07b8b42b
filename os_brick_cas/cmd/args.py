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

"""Command-line arguments several commands share."""

import argparse

from os_brick_cas.cmd import config

#: exit code after Ctrl-C (128 + SIGINT), as shells report it
EXIT_INTERRUPTED = 130


def add_host_argument(parser: argparse.ArgumentParser) -> None:
    """``--host``: this compute host as nova (and Cinder's marker) names it.

    The default is resolved after the configuration is read
    (:func:`resolve_host`), so help text and the rendered CLI reference
    never show the name of the machine they were built on.
    """
    parser.add_argument('--host', default=None, metavar='HOST',
                        help="this compute host's name as nova knows it, "
                             "to compare with Cinder's owner records "
                             "(default: %s: [DEFAULT] host of nova's "
                             'configuration, else the hostname, as nova '
                             'does)' % config.HOST_PLACEHOLDER)


def resolve_host(args: argparse.Namespace) -> None:
    """Fill ``args.host`` with this host's nova name when not given."""
    if 'host' in args and args.host is None:
        args.host = config.nova_host()
