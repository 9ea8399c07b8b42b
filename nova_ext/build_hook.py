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

"""Build step (setup.cfg ``[global] commands``): ship the nova hook's .pth.

``build_py`` also copies ``os_brick_cas_nova.pth`` to the root of the build
(wheel, sdist install) or, for an editable install (PEP 660), to the root of
the editable wheel: either way pip puts it into site-packages (see
:mod:`nova_ext.hook`). Used at build time only; imports setuptools.
"""

import os

from setuptools.command import build_py

PTH = 'os_brick_cas_nova.pth'


class BuildPyWithNovaHook(build_py.build_py):
    """build_py plus the nova hook's .pth at the top of the build."""

    command_name = 'build_py'

    def _pth_target(self) -> str:
        if getattr(self, 'editable_mode', False):
            # PEP 660: setuptools points install_lib at the editable
            # wheel's root; what is written there lands in site-packages.
            root = self.get_finalized_command('install').install_lib
        else:
            root = self.build_lib
        return os.path.join(root, PTH)

    def run(self) -> None:
        super().run()
        self.copy_file(PTH, self._pth_target(), preserve_mode=False)

    def get_outputs(self, *args, **kwargs) -> list:
        return list(super().get_outputs(*args, **kwargs)) + [
            self._pth_target()]

    def get_output_mapping(self) -> dict:
        mapping = dict(super().get_output_mapping())
        mapping[self._pth_target()] = os.path.abspath(PTH)
        return mapping
