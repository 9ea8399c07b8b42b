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

"""A simulated compute host as a test fixture."""

import atexit
import functools
import os
import shutil
import tempfile
from typing import Optional

import fixtures

from cas_standin import host


@functools.cache
def _process_pycache() -> str:
    """One private byte-code directory for every host of this process.

    Each stand-in call is a new interpreter; with a directory per host,
    every test compiled the stand-ins again on its first calls.
    """
    directory = tempfile.mkdtemp(prefix='os-brick-cas-stand-in-pycache-')
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


class SimulatedHost(fixtures.Fixture, host.SimulatedHostControl):
    """A fresh simulated host whose casadm/rbd come first on PATH.

    Every /dev entry it creates is removed on cleanup, even after failures.
    """

    def __init__(self, caches: Optional[dict[int, str]] = None,
                 udev_by_id: bool = False, rbd_backend: str = 'file',
                 state_dir: Optional[str] = None, device_offset: int = 0,
                 datapath_lines: Optional[int] = None):
        fixtures.Fixture.__init__(self)
        self._caches = caches if caches is not None else {1: 'wt', 2: 'wb'}
        self._udev_by_id = udev_by_id
        self._rbd_backend = rbd_backend
        self._state_dir = state_dir
        self._device_offset = device_offset
        self._datapath_lines = datapath_lines

    def _setUp(self) -> None:
        directory = self._state_dir or self.useFixture(
            fixtures.TempDir()).path
        host.SimulatedHostControl.__init__(self, directory)
        self.init(self._caches, udev_by_id=self._udev_by_id,
                  rbd_backend=self._rbd_backend,
                  device_offset=self._device_offset,
                  datapath_lines=self._datapath_lines,
                  pycache_dir=_process_pycache())
        self.addCleanup(self.destroy)
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', self.bin_dir + os.pathsep + os.environ.get('PATH', '')))
