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

"""Provide ``nova.virt.os_brick_cas_libvirt`` without a file in nova's tree.

nova loads ``compute_driver`` as ``nova.virt.<value>``. The wheel installs
``os_brick_cas_nova.pth`` into site-packages; Python runs it at start-up and
it calls :func:`install`, which appends a finder to ``sys.meta_path`` that
answers for that one module name only. Nothing is written into nova, so the
hook survives a nova reinstall or upgrade, an editable nova and a rebuilt
venv or container image (the .pth comes back with this package).

This module is imported by every Python start in the environment: it must
stay cheap (no nova import here; the driver is imported when nova asks).
"""

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Optional, Sequence

#: the module nova imports for ``compute_driver = os_brick_cas_libvirt.X``
MODULE = 'nova.virt.os_brick_cas_libvirt'
#: what it exposes, and where that really lives
DRIVER_CLASS = 'CachedRBDLibvirtDriver'
DRIVER_MODULE = 'nova_ext.driver'
#: the file the wheel installs into site-packages
PTH_NAME = 'os_brick_cas_nova.pth'


class _AliasLoader(importlib.abc.Loader):
    """Fill the alias module with the driver class (imported lazily)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        driver = __import__(DRIVER_MODULE, fromlist=[DRIVER_CLASS])
        setattr(module, DRIVER_CLASS, getattr(driver, DRIVER_CLASS))
        module.__doc__ = ('Alias of %s.%s provided by os-brick-cas (%s).'
                          % (DRIVER_MODULE, DRIVER_CLASS, __name__))


class NovaDriverFinder(importlib.abc.MetaPathFinder):
    """Answers only for :data:`MODULE`; every other import is untouched."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None
                  ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != MODULE:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(),
                                              origin=__name__)


def installed() -> bool:
    """Whether this interpreter has the finder on ``sys.meta_path``."""
    return any(isinstance(f, NovaDriverFinder) for f in sys.meta_path)


def install() -> None:
    """Append the finder once (after the path finders: a real module wins)."""
    if not installed():
        sys.meta_path.append(NovaDriverFinder())


def uninstall() -> None:
    """Remove the finder (tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not isinstance(f, NovaDriverFinder)]
    sys.modules.pop(MODULE, None)
