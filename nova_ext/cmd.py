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

"""``os-brick-cas nova-shim install|remove|check``.

nova imports ``compute_driver`` as ``nova.virt.<value>``. Shipping a file
under ``nova/virt/`` in this wheel would shadow an editable nova's package,
so the shim is written into the *installed* nova at deploy time instead,
wherever that nova lives (site-packages or an editable checkout).
"""

import argparse
import importlib
import os
import sys
from typing import Any, Optional

SHIM_MODULE = 'os_brick_cas_libvirt'
COMPUTE_DRIVER = SHIM_MODULE + '.CachedRBDLibvirtDriver'
SHIM_TEXT = ('# Written by "os-brick-cas nova-shim install"; removed by '
             '"nova-shim remove".\n'
             '# nova.conf: compute_driver = %s\n'
             'from nova_ext.driver import CachedRBDLibvirtDriver  # noqa\n'
             % COMPUTE_DRIVER)


def shim_path(virt_dir: Optional[str] = None) -> str:
    """Where the shim goes: next to nova.virt's __init__.py."""
    if virt_dir is None:
        import nova.virt
        virt_dir = os.path.dirname(nova.virt.__file__)
    return os.path.join(virt_dir, SHIM_MODULE + '.py')


def install(virt_dir: Optional[str] = None) -> str:
    path = shim_path(virt_dir)
    with open(path, 'w') as shim:
        shim.write(SHIM_TEXT)
    return path


def remove(virt_dir: Optional[str] = None) -> bool:
    path = shim_path(virt_dir)
    if not os.path.exists(path):
        return False
    with open(path) as shim:
        if shim.read() != SHIM_TEXT:
            raise SystemExit('%s was not written by os-brick-cas; leaving '
                             'it alone' % path)
    os.unlink(path)
    return True


def check() -> Any:
    """Import the driver the way nova will; return its class."""
    module = importlib.import_module('nova.virt.' + SHIM_MODULE)
    from nova_ext import driver
    driver.check_nova_compatibility()
    return module.CachedRBDLibvirtDriver


def _run(args: argparse.Namespace) -> int:
    if args.action == 'install':
        print('wrote %s; set compute_driver = %s' % (install(args.virt_dir),
                                                     COMPUTE_DRIVER))
    elif args.action == 'remove':
        print('removed' if remove(args.virt_dir) else 'no shim installed')
    else:
        try:
            cls = check()
        except Exception as exc:
            print('nova cannot load %s: %s' % (COMPUTE_DRIVER, exc),
                  file=sys.stderr)
            return 1
        print('compute_driver = %s loads %s.%s' % (
            COMPUTE_DRIVER, cls.__module__, cls.__name__))
    return 0


def register_subcommands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'nova-shim', help="let nova load os-brick-cas's libvirt driver")
    parser.add_argument('action', choices=['install', 'remove', 'check'])
    parser.add_argument('--virt-dir', help='nova/virt directory (default: '
                                           'that of the importable nova)')
    parser.set_defaults(func=_run)
