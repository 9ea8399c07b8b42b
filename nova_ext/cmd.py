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

"""``os-brick-cas nova-shim check|install|remove``.

nova imports ``compute_driver`` as ``nova.virt.<value>``. The package now
provides ``nova.virt.os_brick_cas_libvirt`` itself, from site-packages
(``os_brick_cas_nova.pth`` and :mod:`nova_ext.hook`): nothing is written
into nova's tree, so reinstalling or upgrading nova, an editable nova and a
rebuilt venv or container keep working. ``check`` imports the driver the way
nova does and says what is wrong; ``install`` has nothing left to do;
``remove`` deletes a shim file an older release wrote into nova/virt.
"""

import argparse
import importlib
import os
import site
import sys
from typing import Any, Optional

from nova_ext import hook

SHIM_MODULE = 'os_brick_cas_libvirt'
COMPUTE_DRIVER = SHIM_MODULE + '.CachedRBDLibvirtDriver'
#: what ``nova-shim install`` of older releases wrote into nova/virt
SHIM_TEXT = ('# Written by "os-brick-cas nova-shim install"; removed by '
             '"nova-shim remove".\n'
             '# nova.conf: compute_driver = %s\n'
             'from nova_ext.driver import CachedRBDLibvirtDriver  # noqa\n'
             % COMPUTE_DRIVER)


def shim_path(virt_dir: Optional[str] = None) -> str:
    """Where older releases put the shim: next to nova.virt's __init__."""
    if virt_dir is None:
        import nova.virt
        virt_dir = os.path.dirname(nova.virt.__file__)
    return os.path.join(virt_dir, SHIM_MODULE + '.py')


def hook_pth() -> Optional[str]:
    """The installed ``os_brick_cas_nova.pth`` of this Python, if any."""
    dirs = site.getsitepackages() + [site.getusersitepackages()]
    for directory in dirs:
        path = os.path.join(directory, hook.PTH_NAME)
        if os.path.isfile(path):
            return path
    return None


def remove(virt_dir: Optional[str] = None) -> bool:
    """Delete an older release's shim file; refuse a file we did not write."""
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


def _check(args: argparse.Namespace) -> int:
    pth = hook_pth()
    if pth is None and not hook.installed():
        print('nova cannot load %s: %s is not installed in this Python '
              '(%s). Install os-brick-cas into the environment nova-compute '
              'runs from (pip install os-brick-cas; for a source checkout '
              'pip install -e .), then run this check with that '
              "environment's python." % (COMPUTE_DRIVER, hook.PTH_NAME,
                                         sys.prefix), file=sys.stderr)
        return 1
    try:
        cls = check()
    except Exception as exc:
        print('nova cannot load %s: %s' % (COMPUTE_DRIVER, exc),
              file=sys.stderr)
        return 1
    print('compute_driver = %s loads %s.%s (provided by %s; nothing in '
          "nova's tree)" % (COMPUTE_DRIVER, cls.__module__, cls.__name__,
                            pth or hook.__name__))
    if os.path.exists(shim_path(args.virt_dir)):
        print('note: %s is left over from an older os-brick-cas; remove it '
              'with "os-brick-cas nova-shim remove"' %
              shim_path(args.virt_dir), file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.action == 'install':
        print('nothing to install: os-brick-cas provides nova.virt.%s from '
              "site-packages (%s), not from nova's tree. Set compute_driver "
              '= %s and run "os-brick-cas nova-shim check".' % (
                  SHIM_MODULE, hook.PTH_NAME, COMPUTE_DRIVER))
    elif args.action == 'remove':
        print('removed %s' % shim_path(args.virt_dir)
              if remove(args.virt_dir) else 'no shim file in nova/virt')
    else:
        return _check(args)
    return 0


def register_subcommands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'nova-shim', help="check that nova can load os-brick-cas's libvirt "
                          'driver (install: obsolete, remove: delete an old '
                          'shim file)')
    parser.add_argument('action', choices=['check', 'install', 'remove'])
    parser.add_argument('--virt-dir', help='nova/virt directory (default: '
                                           'that of the importable nova)')
    parser.set_defaults(func=_run)
