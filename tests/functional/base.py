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

"""Functional tier: the real os_brick_cas code against the host simulator.

Everything above the process boundary is real: the connector, os-brick's
RBDConnector and executor, the privsep entry points (run in-process, or
through a real privsep daemon in test_privsep_daemon), processutils. Below
it run the stand-in ``casadm`` and ``rbd`` executables of
:mod:`cas_standin`, which print what the real tools print.

State is observed the way an operator would: through ``casadm -L/-P`` and
``rbd showmapped`` of the simulated host, parsed with the product's parser.
"""

import json
import os
import stat
import subprocess
from typing import Any, Optional

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from cas_standin import fixture as sim_fixture
from cas_standin import state as sim_state
from os_brick_cas import connector
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from os_brick_cas import rbd_names
from tests import privsep_fixture

MODES = {1: 'wt', 2: 'wb', 3: 'wa', 4: 'wo', 5: 'pt'}
POOL = 'volumes'
#: by-id links the simulator's images get (its fixed cluster fsid), and
#: the 1.x names of tests that set up pre-upgrade cores
SIM_LINK_PREFIXES = (
    rbd_names.PREFIX + rbd_names.normal_fsid(sim_state.SIMULATED_FSID),
    'rbd-%s-' % POOL, 'rbd-a-')


def can_use_dev() -> Optional[str]:
    """Why this tier cannot run here (None if it can)."""
    if os.geteuid() != 0:
        return 'the simulator creates /dev entries: run as root'
    if not os.access('/dev', os.W_OK):
        return '/dev is not writable'
    return None


class FunctionalTestCase(testtools.TestCase):
    """One simulated compute host per test, caches for all five modes."""

    caches = MODES
    udev_by_id = False
    persistent_caches: Optional[list[int]] = None  # default: all
    #: cache lines of a data-true host (None: the counter-only simulator)
    datapath_lines: Optional[int] = None

    def setUp(self) -> None:
        super().setUp()
        reason = can_use_dev()
        if reason:
            self.skipTest(reason)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self._remove_debris_links()
        self.host = self.useFixture(sim_fixture.SimulatedHost(
            caches=dict(self.caches), udev_by_id=self.udev_by_id,
            datapath_lines=self.datapath_lines))
        os.mkdir(os.path.join(self.tmp, 'opencas'))
        self.opencas_conf = os.path.join(self.tmp, 'opencas', 'opencas.conf')
        self.write_opencas_conf(self.persistent_caches
                                if self.persistent_caches is not None
                                else list(self.caches))
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.conf.config(group=opts.GROUP, lock_path=self.tmp,
                         state_path=self.tmp,
                         service_group=str(os.getegid()),
                         opencas_conf=self.opencas_conf, flush_timeout=5,
                         host_layout=os.path.join(self.tmp,
                                                  'host-layout.yaml'),
                         sysfs_rbd_root=self.host.sysfs_root,
                         cache_instances={mode: str(cache_id) for
                                          cache_id, mode in
                                          self.caches.items()})
        self.set_sim_opencas_conf()
        self.useFixture(privsep_fixture.PrivsepInProcess())
        # non-cacheable volumes are krbd-mapped too (os-brick local attach)
        self.connector = connector.CachedRBDConnector(None,
                                                      do_local_attach=True)
        self.addCleanup(self._remove_stray_links)

    def _remove_stray_links(self) -> None:
        # links the product creates itself; a failed test must not leave
        # them to the next one (passing tests assert there are none)
        for name in self.by_id_links():
            os.unlink(os.path.join('/dev/disk/by-id', name))

    def _remove_debris_links(self) -> None:
        # a killed earlier run can leave links to simulated devices (plain
        # files) or to nothing; a real krbd link points at a block device
        for name in self.by_id_links():
            link = os.path.join('/dev/disk/by-id', name)
            if not (os.path.exists(link) and
                    stat.S_ISBLK(os.stat(link).st_mode)):
                os.unlink(link)

    # -- simulated host set-up -------------------------------------------
    def write_opencas_conf(self, cache_ids: list[int]) -> None:
        lines = ['version=19.3.0', '[caches]']
        lines += ['%d\t/dev/disk/by-id/nvme-sim-part%d\t%s' % (
            cache_id, cache_id, self.caches[cache_id].upper())
            for cache_id in cache_ids]
        lines += ['[cores]']
        with open(self.opencas_conf, 'w') as conf_file:
            conf_file.write('\n'.join(lines) + '\n')

    def set_sim_opencas_conf(self) -> None:
        self.host.set_opencas_conf(self.opencas_conf)

    def image(self, name: str, size_mb: int = 16) -> str:
        self.host.create_image(POOL, name, size_mb)
        return name

    def props(self, image: str, mode: Optional[str] = 'wt',
              **extra: Any) -> dict[str, Any]:
        data = {'name': '%s/%s' % (POOL, image), 'hosts': ['127.0.0.1'],
                'ports': ['6789'], 'auth_username': 'cinder',
                'cluster_name': 'ceph', 'volume_id': image,
                'auth_enabled': False}
        if mode is not None:
            data.update(cacheable=True, cache_mode=mode)
        data.update(extra)
        return data

    # -- observing the host through its tools ------------------------------
    def _tool(self, *argv: str) -> str:
        return subprocess.run(list(argv), check=True, capture_output=True,
                              text=True, env=os.environ.copy()).stdout

    def cleanup_volume(self, props: dict) -> None:
        """Last resort after a failed example: detach, dropping nothing."""
        try:
            self.connector.disconnect_volume(dict(props, cas_owner_epoch=''),
                                             None)
        except Exception:
            pass

    def cache_list(self) -> list[casadm_output.CacheInstance]:
        return casadm_output.parse_list(self._tool('casadm', '-L', '-o', 'csv',
                                                   '-b'))

    def cores(self) -> list[casadm_output.Core]:
        return [core for cache in self.cache_list() for core in cache.cores]

    def dirty(self, core: casadm_output.Core) -> int:
        stats = casadm_output.parse_stats(self._tool(
            'casadm', '-P', '-i', str(core.cache_id), '-j',
            str(core.core_id), '-o', 'csv'))
        return int(stats[casadm_output.DIRTY_BLOCKS])

    def mappings(self) -> list[dict[str, str]]:
        return json.loads(self._tool('rbd', 'showmapped', '--format=json'))

    def link(self, image: str, pool: str = POOL) -> str:
        """The by-id link that names *image* on the simulated host."""
        return self.host.by_id_link(pool, image)

    @staticmethod
    def by_id_links() -> list[str]:
        """rbd by-id links of simulated images (never a real cluster's)."""
        directory = '/dev/disk/by-id'
        if not os.path.isdir(directory):
            return []
        return sorted(name for name in os.listdir(directory)
                      if name.startswith(SIM_LINK_PREFIXES))

    def assert_clean_host(self) -> None:
        """No core, no mapping, no by-id link, no opencas.conf core row."""
        self.assertEqual([], self.cores())
        self.assertEqual([], self.mappings())
        self.assertEqual([], self.by_id_links())
        with open(self.opencas_conf) as conf_file:
            text = conf_file.read()
        self.assertEqual('', text.split('[cores]\n', 1)[1].strip())

    def casadm_argvs(self) -> list[list[str]]:
        return [call['argv'] for call in self.host.calls()
                if os.path.basename(call['argv'][0]) == 'casadm']
