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

"""nova 34's real compute manager on its fake libvirt, simulator below.

The os-brick-cas driver is loaded the way a deployment loads it: through
the ``nova.virt.os_brick_cas_libvirt`` module (nova_ext.hook) named in
``compute_driver``. casadm and rbd are the host simulator's stand-ins;
Cinder is nova's CinderFixture plus a fake fence endpoint at the HTTP
layer (requests-mock mounted only on its own URL).
"""

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from typing import Iterator, Optional

import fixtures
from keystoneauth1 import session as ks_session
import nova.conf as nova_conf
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from oslo_serialization import jsonutils
import requests_mock

from cas_standin import fixture as sim_fixture
from cas_standin import state as sim_state
from nova_ext import cmd as nova_cmd
from nova_ext import driver as nova_driver  # noqa: F401 ([os_brick_cas_nova])
from nova_ext import hook as nova_hook
from os_brick_cas import drain
from os_brick_cas.opencas import casadm_output
from os_brick_cas import rbd_names
from tests.functional import fake_cinder
from tests.nova import compat as nova_test_compat
from tests import privsep_fixture

CONF = nova_conf.CONF
CINDER = 'http://cinder.fake/v3/project'
CACHES = {1: 'wt', 2: 'wb'}
#: how long a wait for a server, migration or detach state may take: nova's
#: helpers give up after 5-10 s, but here each casadm/rbd call is a
#: process of the simulated host, and CI runs this suite beside the TCG
#: guest at the lowest priority
WAIT_SECONDS = 120


class FakeFenceCinder(object):
    """Cinder's volume show + fence actions, as requests-mock callbacks."""

    def __init__(self):
        self.fences: dict[str, str] = {}
        self.epochs: dict[str, str] = {}
        self.lost: dict[str, list[str]] = {}
        self.drained: dict[str, str] = {}
        self.adapter = requests_mock.Adapter()
        self.adapter.register_uri(
            'GET', re.compile(CINDER + '/volumes/[^/]+$'), json=self._show)
        self.adapter.register_uri(
            'POST', re.compile(CINDER + '/volumes/[^/]+/action$'),
            status_code=202, text=self._action)

    def _show(self, request, context):
        volume_id = request.path.rstrip('/').split('/')[-1]
        return {'volume': {'id': volume_id,
                           'os-brick-cas:fence': self.fences.get(volume_id),
                           'os-brick-cas:fence-epoch':
                               self.epochs.get(volume_id),
                           'os-brick-cas:fence-lost':
                               ','.join(self.lost.get(volume_id, [])),
                           'os-brick-cas:fence-drained':
                               self.drained.get(volume_id)}}

    def _record(self, volume_id: str) -> Optional[dict]:
        """The marker as cinder_ext's ``expect``/``current`` object."""
        if not self.fences.get(volume_id):
            return None
        epoch = self.epochs.get(volume_id) or None
        return {'host': self.fences[volume_id], 'epoch': epoch,
                'drained': bool(epoch and
                                self.drained.get(volume_id) == epoch)}

    def _action(self, request, context):
        volume_id = request.path.split('/')[-2]
        body = request.json()
        params = next(iter(body.values())) or {}
        if ('expect' in params and
                params['expect'] != self._record(volume_id)):
            # cinder_ext's compare-and-swap refusal
            context.status_code = 409
            return json.dumps({'conflict': {
                'message': 'fence marker changed',
                'current': self._record(volume_id)}})
        if 'os-brick-cas-set-fence' in body:
            params = body['os-brick-cas-set-fence']
            self.fences[volume_id] = params['host']
            self.epochs[volume_id] = params.get('epoch')
            if params.get('drained'):
                self.drained[volume_id] = params['epoch']
            else:
                self.drained.pop(volume_id, None)
        elif 'os-brick-cas-clear-fence' in body:
            host = self.fences.pop(volume_id, None)
            epoch = self.epochs.pop(volume_id, None)
            self.drained.pop(volume_id, None)
            if body['os-brick-cas-clear-fence'].get('lost') and host:
                self.lost.setdefault(volume_id, []).append(
                    '%s/%s' % (host, epoch or ''))
        return ''

    def session(self) -> ks_session.Session:
        return fake_cinder.session(self.adapter, CINDER)

    def client(self):
        from cinderclient import client as cinder_client
        return cinder_client.Client('3', session=self.session())


class CachedVolumeTestBase(nova_test_compat.ServersTestBase):

    microversion = 'latest'
    #: volume id -> cache mode (None: a plain rbd volume); the Cinder
    #: fixture hands out their connection_info, each has a 16 MiB image
    volumes: dict[str, Optional[str]] = {}
    #: 4 KiB lines of each data-true cache instance (None: counters only)
    datapath_lines: Optional[int] = None
    #: ceph.conf of a real cluster whose images ``rbd map`` maps (None:
    #: file-backed images per host)
    ceph_conf: Optional[str] = None

    def _keep_waiting(self, wait, *args, **kwargs):
        """Call nova's *wait* helper again until WAIT_SECONDS have passed."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                return wait(*args, **kwargs)
            except self.failureException:
                if time.monotonic() >= deadline:
                    raise

    def _wait_for_server_parameter(self, server, expected_params,
                                   max_retries=10, **kwargs):
        return self._keep_waiting(
            super()._wait_for_server_parameter, server, expected_params,
            max_retries, **kwargs)

    def _wait_for_migration_status(self, server, expected_statuses):
        return self._keep_waiting(super()._wait_for_migration_status,
                                  server, expected_statuses)

    def _wait_for_volume_detach(self, server_id, volume_id):
        return self._keep_waiting(super()._wait_for_volume_detach,
                                  server_id, volume_id)

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest('the host simulator creates /dev entries: root')
        # what os_brick_cas_nova.pth does in an installed environment
        if not nova_hook.installed():
            nova_hook.install()
            self.addCleanup(nova_hook.uninstall)
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.CinderFixture.VOLUME_CONNECTION_INFO',
            dict(nova_fixtures.CinderFixture.VOLUME_CONNECTION_INFO,
                 **{volume_id: self.rbd_info('volume-' + volume_id, mode)
                    for volume_id, mode in self.volumes.items()})))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.host = self.new_host()
        self.opencas_conf = os.path.join(self.tmp, 'opencas.conf')
        with open(self.opencas_conf, 'w') as conf_file:
            conf_file.write('version=19.3.0\n[caches]\n'
                            '1\t/dev/disk/by-id/nvme-a-part1\tWT\n'
                            '2\t/dev/disk/by-id/nvme-a-part2\tWB\n'
                            '[cores]\n')
        self.host.set_opencas_conf(self.opencas_conf)
        self.create_images(self.host)
        self.hosts = {'compute1': self.host}
        self.base_path = os.environ['PATH'].split(os.pathsep, 1)[1]
        self.flags(enabled=True, group='os_brick_cas_nova')
        self.flags(cache_instances={'wt': '1', 'wb': '2'},
                   opencas_conf=self.opencas_conf, lock_path=self.tmp,
                   host_layout=os.path.join(self.tmp, 'host-layout.yaml'),
                   # the host's files (e.g. sys/module/cas_cache/version)
                   # come from the test's own root, never the real one
                   host_root=os.path.join(self.tmp, 'root'),
                   state_path=self.tmp,
                   flush_timeout=5, sysfs_rbd_root=self.host.sysfs_root,
                   group='os_brick_cas')
        self.flags(device_detach_timeout=1, group='libvirt')
        self.useFixture(privsep_fixture.PrivsepInProcess())
        self.cinder = FakeFenceCinder()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.fence.client_factory', self.cinder.client))
        self.attach_xml: list[str] = []
        original = fakelibvirt.Domain.attachDeviceFlags

        def capture(domain, xml, flags):
            self.attach_xml.append(xml)
            return original(domain, xml, flags)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.attachDeviceFlags', capture))
        self.addCleanup(self._remove_stray_links)

    def new_host(self, **options) -> sim_fixture.SimulatedHost:
        """A simulated host (:attr:`datapath_lines`, :attr:`ceph_conf`)."""
        host = self.useFixture(sim_fixture.SimulatedHost(
            caches=CACHES, datapath_lines=self.datapath_lines, **options))
        if self.ceph_conf:
            host.use_ceph(self.ceph_conf)
        return host

    def _setup_services(self):
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        super()._setup_services()

    def _setup_compute_service(self):
        self.flags(compute_driver=nova_cmd.COMPUTE_DRIVER)

    def create_images(self, host: sim_fixture.SimulatedHost) -> None:
        """The RBD images of :attr:`volumes` (one Ceph behind all hosts)."""
        for volume_id in self.volumes:
            host.create_image('volumes', 'volume-' + volume_id, 16)

    def stored_device_path(self, server: dict, volume_id: str) -> str:
        """device_path in the connection_info nova stored for the BDM."""
        [bdm] = [b for b in objects.BlockDeviceMappingList.
                 get_by_instance_uuid(nova_context.get_admin_context(),
                                      server['id'])
                 if b.volume_id == volume_id]
        return jsonutils.loads(bdm.connection_info)['data']['device_path']

    @staticmethod
    def rbd_info(image: str, mode: str | None) -> dict:
        data = {'name': 'volumes/%s' % image, 'hosts': ['127.0.0.1'],
                'ports': ['6789'], 'auth_enabled': False,
                'auth_username': 'cinder', 'cluster_name': 'ceph',
                'secret_type': 'ceph', 'secret_uuid': None,
                'volume_id': image.replace('volume-', ''), 'discard': True}
        if mode:
            data.update(cacheable=True, cache_mode=mode)
        return {'driver_volume_type': 'rbd', 'data': data}

    # -- the simulated host, through its own tools -------------------------
    def _tool(self, host: Optional[str], *argv: str) -> str:
        env = None
        if host:
            env = dict(os.environ, PATH=self.hosts[host].bin_dir +
                       os.pathsep + self.base_path)
        return subprocess.run(list(argv), check=True, capture_output=True,
                              text=True, env=env).stdout

    def cores(self, host: Optional[str] = None) -> list[casadm_output.Core]:
        return [core for cache in casadm_output.parse_list(self._tool(
            host, 'casadm', '-L', '-o', 'csv', '-b')) for core in cache.cores]

    def mappings(self, host: Optional[str] = None) -> list[dict]:
        return json.loads(self._tool(host, 'rbd', 'showmapped',
                                     '--format=json'))

    def drained_on(self, compute: str) -> set[int]:
        """Core ids the wb instance's IO-class table of *compute* drains."""
        return drain.drained_cores(casadm_output.parse_io_classes(self._tool(
            compute, 'casadm', '-C', '-L', '-i', '2', '-o', 'csv')))

    def dirty(self, compute: str, core) -> int:
        """Dirty blocks of *core* on *compute*'s simulated host."""
        caches = self.hosts[compute].state()['caches']
        return caches[str(core.cache_id)]['cores'][str(core.core_id)][
            'dirty']

    # -- two simulated hosts in one process ----------------------------------
    def add_second_host(self) -> None:
        """Give compute2 its own simulated host (own casadm/rbd state).

        Both computes run in this process and share /dev, so the hosts
        number their devices apart (device_offset) and :meth:`on_host`
        swaps the symlinks udev would keep per machine (/dev/rbd/<pool>/,
        /dev/disk/by-id/rbd-*) when a compute's volume driver runs.
        """
        second = self.new_host(udev_by_id=True, device_offset=50)
        conf = os.path.join(self.tmp, 'opencas-compute2.conf')
        with open(self.opencas_conf) as source, open(conf, 'w') as copy:
            copy.write(source.read())
        second.set_opencas_conf(conf)
        self.host.set_udev_by_id(True)
        self.hosts['compute2'] = second
        self.host_conf = {'compute1': self.opencas_conf, 'compute2': conf}
        self.host_links: dict[str, dict[str, str]] = {
            'compute1': {}, 'compute2': {}}
        self.current_host = 'compute1'
        self._enter_host('compute1')
        self.addCleanup(self._stash_links, 'compute1')

    @staticmethod
    def _udev_links() -> dict[str, str]:
        links = {}
        for top in ('/dev/disk/by-id', '/dev/rbd'):
            for root, dirs, files in os.walk(top):
                for name in files + dirs:
                    path = os.path.join(root, name)
                    if os.path.islink(path) and (
                            top == '/dev/rbd' or name.startswith('rbd-')):
                        links[path] = os.readlink(path)
        return links

    def _stash_links(self, host: str) -> None:
        self.host_links[host] = self._udev_links()
        for path in self.host_links[host]:
            os.unlink(path)

    def _enter_host(self, host: str) -> None:
        for path, target in self.host_links[host].items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(target, path)
        os.environ['PATH'] = (self.hosts[host].bin_dir + os.pathsep +
                              self.base_path)
        # krbd's sysfs is per machine, like opencas.conf
        self.flags(opencas_conf=self.host_conf[host],
                   sysfs_rbd_root=self.hosts[host].sysfs_root,
                   state_path=os.path.join(self.tmp, 'state-' + host),
                   group='os_brick_cas')
        self.current_host = host

    @contextlib.contextmanager
    def on_host(self, host: str) -> Iterator[None]:
        """Run the enclosed code as if on compute *host*'s machine."""
        previous = self.current_host
        previous_conf_host = CONF.host
        if previous != host:
            self._stash_links(previous)
            self._enter_host(host)
        # nova sets CONF.host to the last compute started; on a real
        # machine it names this machine
        self.flags(host=host)
        try:
            yield
        finally:
            if previous != host:
                self._stash_links(host)
                self._enter_host(previous)
            self.flags(host=previous_conf_host)

    def bind_compute_to_host(self, compute: str) -> None:
        """Make *compute*'s cached volume driver act on its own host."""
        volume_driver = self.computes[compute].driver.\
            _cached_rbd_volume_driver()
        for target, name in (
                (volume_driver, 'connect_volume'),
                (volume_driver, 'disconnect_volume'),
                (volume_driver, 'extend_volume'),
                (volume_driver.lifecycle, 'drain'),
                (volume_driver.lifecycle, 'undrain'),
                (volume_driver.lifecycle, 'drain_blocker'),
                (volume_driver.lifecycle, 'is_drained'),
                (volume_driver.lifecycle, 'reclaim_drained'),
                (volume_driver.lifecycle, 'resolve_unfinished')):
            original = getattr(target, name)

            def on_own_host(*args, _original=original, **kwargs):
                with self.on_host(compute):
                    return _original(*args, **kwargs)

            setattr(target, name, on_own_host)
        # host checks of the virt driver itself run on that machine too
        driver = self.computes[compute].driver
        for name in ('check_can_live_migrate_destination',
                     'update_provider_tree'):
            original = getattr(driver, name)

            def on_driver_host(*args, _original=original, **kwargs):
                with self.on_host(compute):
                    return _original(*args, **kwargs)

            setattr(driver, name, on_driver_host)

    @staticmethod
    def by_id_links() -> list[str]:
        directory = '/dev/disk/by-id'
        prefix = rbd_names.PREFIX + rbd_names.normal_fsid(
            sim_state.SIMULATED_FSID)
        return sorted(n for n in os.listdir(directory)
                      if n.startswith(prefix)) if os.path.isdir(
            directory) else []

    @staticmethod
    def _unlink(name: str) -> None:
        path = os.path.join('/dev/disk/by-id', name)
        if os.path.islink(path):
            os.unlink(path)

    def _remove_stray_links(self) -> None:
        for name in self.by_id_links():
            self._unlink(name)

    def guest_xml(self, server: dict, compute: str = 'compute1') -> str:
        """The domain XML of *server* on *compute*'s fake libvirt."""
        connection = self.computes[compute].driver._host.get_connection()
        return connection.lookupByUUIDString(server['id']).XMLDesc(0)

    def detach(self, server: dict, volume_id: str) -> None:
        self.api.delete_server_volume(server['id'], volume_id)
        self._wait_for_volume_detach(server['id'], volume_id)
