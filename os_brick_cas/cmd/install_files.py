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

"""``os-brick-cas host install-files``: the package's files under /etc.

Installs the udev rule (its namer at this installation's path), nova's
rootwrap filter, the drop-in ordering nova-compute after Open CAS and the
exporter's systemd unit (its ``os-brick-cas`` at this installation's
path). Prints one line per file, ``installed`` or ``unchanged``; with
``--check`` changes nothing and exits 1 when a file differs. Exit 2: the
package's files cannot be found or written.
"""

import argparse
import sys
from typing import Any

from os_brick_cas.host import installed_files


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'host', help='the host files of os-brick-cas')
    verbs = parser.add_subparsers(dest='host_command', required=True)
    sub = verbs.add_parser(
        'install-files',
        help='install the udev rule, the rootwrap filter, the nova-compute '
             'drop-in and the exporter unit, naming this installation\'s '
             'commands')
    sub.add_argument('--only', action='append', choices=installed_files.KINDS,
                     metavar='KIND',
                     help='install only this kind of file (repeatable; '
                          'default: all of %s)'
                          % ', '.join(installed_files.KINDS))
    sub.add_argument('--rootwrap-dir', default='/etc/nova/rootwrap.d',
                     help='nova\'s rootwrap filters directory (default: '
                          '%(default)s)')
    sub.add_argument('--udev-rules-dir', default='/etc/udev/rules.d',
                     help='udev\'s rules directory (default: %(default)s)')
    sub.add_argument('--nova-compute-unit', action='append', metavar='UNIT',
                     help='systemd unit running nova-compute that gets the '
                          'drop-in (repeatable; default: '
                          'nova-compute.service)')
    sub.add_argument('--root', default='/',
                     help='install under this directory instead of / (an '
                          'image or a staging tree)')
    sub.add_argument('--check', action='store_true',
                     help='change nothing; exit 1 when a file is missing or '
                          'differs')
    sub.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kinds = tuple(args.only or installed_files.KINDS)
    units = tuple(args.nova_compute_unit or ('nova-compute.service',))
    try:
        files = installed_files.plan(kinds, args.rootwrap_dir, units,
                                     udev_rules_dir=args.udev_rules_dir)
        differ = [item for item in files if item.differs(args.root)]
        for item in files:
            if item not in differ:
                print('unchanged %s' % item.dest)
            elif args.check:
                print('differs %s (from %s)' % (item.dest, item.source))
            else:
                item.install(args.root)
                print('installed %s (from %s)' % (item.dest, item.source))
    except (installed_files.HostFilesError, OSError) as exc:
        print('os-brick-cas host install-files: %s' % exc, file=sys.stderr)
        return 2
    if args.check:
        return 1 if differ else 0
    reload = sorted({'udevadm control --reload' for item in differ
                     if item.kind == installed_files.UDEV_RULE} |
                    {'systemctl daemon-reload' for item in differ
                     if item.kind in (installed_files.NOVA_DROPIN,
                                      installed_files.EXPORTER_UNIT)})
    if reload:
        print('then run: %s' % '; '.join(reload))
    return 0
