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

"""``os-brick-cas-simulator``: create and drive a simulated host.

    os-brick-cas-simulator init --state DIR --cache 1:wt --cache 2:wb
    export PATH=DIR/bin:$PATH          # casadm and rbd are now simulated
    os-brick-cas-simulator --state DIR image-create volumes/volume-1 --size 64
    os-brick-cas-simulator --state DIR fault --verb flush-core --exit-code 1 \\
        --stderr 'Core device not available'
    os-brick-cas-simulator --state DIR reboot
"""

import argparse
import json
import sys
from typing import Optional

from cas_standin import host
from cas_standin import module as sim_module
from cas_standin import releases
from cas_standin import state as state_mod


def _cache_pair(text: str) -> tuple[int, str]:
    cache_id, _, mode = text.partition(':')
    if mode not in ('wt', 'wb', 'wa', 'wo', 'pt'):
        raise argparse.ArgumentTypeError('expected ID:MODE, e.g. 2:wb')
    return int(cache_id), mode


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='os-brick-cas-simulator',
        description='Simulated Open CAS + krbd host for tests and demos. '
                    'Nothing here touches a real cache.')
    parser.add_argument('--state', help='state directory (default: $%s)'
                        % state_mod.ENV)
    sub = parser.add_subparsers(dest='command', required=True)
    init = sub.add_parser('init', help='boot a fresh simulated host')
    init.add_argument('--cache', action='append', type=_cache_pair,
                      default=[], metavar='ID:MODE')
    init.add_argument('--udev-by-id', action='store_true',
                      help='rbd map also creates the by-id link')
    init.add_argument('--rbd-backend', choices=['file', 'ceph'],
                      default='file')
    init.add_argument('--open-cas-release', metavar='VERSION',
                      help='what casadm -V and the loaded module report '
                           '(default %s)' % releases.DEFAULT_VERSION)
    init.add_argument('--patched-build', action='store_true',
                      help="the loaded module is the os_brick_cas role's "
                           'build with its patch series (its manifest and '
                           'srcversion under the host root), as the role '
                           'installs v26.03.2')
    image = sub.add_parser('image-create', help='create an RBD image')
    image.add_argument('spec', metavar='POOL/IMAGE')
    image.add_argument('--size', type=int, default=16, help='MiB')
    fault = sub.add_parser('fault', help='make the Nth call of a verb fail')
    fault.add_argument('--verb', required=True)
    fault.add_argument('--nth', type=int, default=1)
    fault.add_argument('--count', type=int, default=1)
    fault.add_argument('--exit-code', type=int, default=1)
    fault.add_argument('--stdout', default='')
    fault.add_argument('--stderr', default='')
    fault.add_argument('--hang', type=float)
    dirty = sub.add_parser('set-dirty', help='dirty blocks of a core')
    dirty.add_argument('cache_id', type=int)
    dirty.add_argument('core_id', type=int)
    dirty.add_argument('blocks', type=int)
    latency = sub.add_parser('latency', help='per-command latency')
    latency.add_argument('milliseconds', type=float)
    conf = sub.add_parser('opencas-conf', help='file a reboot reads')
    conf.add_argument('path')
    module = sub.add_parser('module', help='load/unload the kernel module')
    module.add_argument('action', choices=['load', 'unload'])
    sub.add_parser('reboot', help='power-cycle the host')
    sub.add_parser('show', help='print the state as JSON')
    sub.add_parser('destroy', help='remove every /dev entry created')
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    control = host.SimulatedHostControl(state_mod.state_dir(args.state))
    if args.command == 'init':
        control.init(dict(args.cache), udev_by_id=args.udev_by_id,
                     rbd_backend=args.rbd_backend)
        if args.open_cas_release:
            control.set_version(args.open_cas_release)
        if args.patched_build:
            version = args.open_cas_release or releases.DEFAULT_VERSION
            sim_module.load(control.host_root, version,
                            sim_module.build(control.host_root, version))
        print('simulated host in %s; put %s first on PATH and set '
              '[os_brick_cas] host_root = %s (its loaded Open CAS module)'
              % (control.state_dir, control.bin_dir, control.host_root))
    elif args.command == 'image-create':
        pool, _, image = args.spec.partition('/')
        control.create_image(pool, image, args.size)
    elif args.command == 'fault':
        control.inject_fault(args.verb, exit_code=args.exit_code,
                             stdout=_line(args.stdout),
                             stderr=_line(args.stderr), hang=args.hang,
                             nth=args.nth, count=args.count)
    elif args.command == 'set-dirty':
        control.set_dirty(args.cache_id, args.core_id, args.blocks)
    elif args.command == 'latency':
        control.set_latency(args.milliseconds)
    elif args.command == 'opencas-conf':
        control.set_opencas_conf(args.path)
    elif args.command == 'module':
        control.set_module_loaded(args.action == 'load')
    elif args.command == 'reboot':
        control.reboot()
    elif args.command == 'show':
        json.dump(control.state(), sys.stdout, indent=1, sort_keys=True)
        print()
    elif args.command == 'destroy':
        control.destroy()
    return 0


def _line(text: str) -> str:
    return text + '\n' if text and not text.endswith('\n') else text


if __name__ == '__main__':
    sys.exit(main())
