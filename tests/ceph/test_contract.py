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

"""The host contract (tests/host_contract.py) on the stand-in.

The functional tier's simulated host (stand-in casadm and rbd, data-true
cache engine) over this tier's real cluster: only there can a test read
back what Ceph holds after a detach (the functional tier's images do not
outlive their mapping). The same scenarios run on the real kernel in
tests/kernel/test_contract.py.
"""

import os
import subprocess
from typing import Optional
import uuid


from os_brick_cas.opencas import casadm_output
from os_brick_cas import rbd_names
from tests.functional import base as functional
from tests import host_contract
from tests import real_ceph


class StandInHost(functional.FunctionalTestCase):
    """The simulated host, its krbd stand-in mapping real images."""

    pool = real_ceph.POOL
    udev_by_id = True
    datapath_lines = 4096

    def setUp(self) -> None:
        real_ceph.skip_or_fail(self)
        super().setUp()
        self.ceph_conf = real_ceph.shared_cluster().conf
        self.host.use_ceph(self.ceph_conf)
        # started as an operator (and the guest) does: by a path casadm
        # accepts, the one opencas.conf lists
        for cache_id, mode in sorted(self.caches.items()):
            self.casadm_ok('-T', '-i', str(cache_id))
            self.casadm_ok('-S', '-i', str(cache_id), '-d',
                           '/dev/disk/by-id/nvme-sim-part%d' % cache_id,
                           '-c', mode, '--force')

    def image(self, label: str, size_mb: int = 64) -> str:
        name = 'volume-%s-%s' % (label, uuid.uuid4().hex[:6])
        real_ceph.create_image(self.ceph_conf, name, size_mb * 2 ** 20)
        self.addCleanup(real_ceph.remove_image, self.ceph_conf, name)
        return name

    def in_ceph(self, image: str, offset: int, length: int) -> str:
        return real_ceph.digest(self.ceph_conf, image, offset, length)

    def cas(self, *args: str, golden: Optional[str] = None
            ) -> subprocess.CompletedProcess:
        return subprocess.run(['casadm', *args], capture_output=True,
                              text=True, env=os.environ.copy())

    def casadm_ok(self, *args: str, golden: Optional[str] = None) -> str:
        done = self.cas(*args)
        self.assertEqual(0, done.returncode, done.stderr)
        return done.stdout

    def dirty(self, core: casadm_output.Core,
              golden: Optional[str] = None) -> int:
        return super().dirty(core)

    def mapped_devices(self) -> list[str]:
        return [mapping['device'] for mapping in self.mappings()]

    def opencas_core_rows(self) -> str:
        with open(self.opencas_conf) as conf_file:
            return conf_file.read().split('[cores]\n', 1)[1].strip()

    def by_id_links(self) -> list[str]:
        """The simulator's links and those named after the real cluster."""
        ours = super().by_id_links()
        fsid = getattr(self, 'host', None) and self.host.state().get(
            'cluster_fsid')
        if not fsid:
            return ours
        prefix = rbd_names.PREFIX + rbd_names.normal_fsid(fsid)
        directory = '/dev/disk/by-id'
        return sorted(set(ours) | {
            name for name in os.listdir(directory)
            if name.startswith(prefix)})

    def load_after_crash(self, cache_id: int, device: str) -> None:
        self.casadm_ok('-S', '-d', device, '-l')

    def assert_unmap_never_forced(self) -> None:
        self.assertFalse([call for call in self.host.calls('rbd', 'unmap')
                          if 'force' in call['argv']])


class EveryModeTestCase(host_contract.EveryModeContract, StandInHost):
    pass


class BusyUnmapTestCase(host_contract.BusyUnmapContract, StandInHost):
    pass


class CrashReloadTestCase(host_contract.CrashReloadContract, StandInHost):
    pass


class DrainTestCase(host_contract.DrainContract, StandInHost):
    pass
