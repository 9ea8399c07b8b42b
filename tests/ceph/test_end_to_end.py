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

"""Data end to end on real Ceph: cinder_ext driver -> connector -> librbd."""

import json
import os
import subprocess
import sys
from typing import Any
from xml.etree import ElementTree

import ddt

from cinder import exception as cinder_exception
from cinder.tests.unit import fake_snapshot

from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from tests.ceph import base
from tests.ceph import blockio
from tests.ceph import nova_attach

MIB = 2 ** 20
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@ddt.ddt
class EndToEndTestCase(base.CephTestCase):

    @ddt.data('wt', 'wb', 'wa', 'wo', 'pt')
    def test_pattern_written_to_libvirt_path_is_in_ceph(self, mode):
        volume = self.create(mode)
        data, device = self.attach(volume)
        self.assertEqual((True, mode), (data['cacheable'],
                                        data['cache_mode']))
        self.assertTrue(device['path'].startswith('/dev/cas'))
        payload = blockio.pattern('%s %s' % (mode, volume.id), MIB)
        blockio.write_direct(device['path'], 4 * MIB, payload)
        self.assertEqual(payload, blockio.read_direct(device['path'],
                                                      4 * MIB, MIB))
        self.connector.disconnect_volume(data, device)
        self.assertEqual({}, self.host.state()['mappings'])
        self.assertEqual(payload, self.read_from_ceph(volume.name, 4 * MIB,
                                                      MIB))

    def test_two_volumes_attached_at_once_stay_apart(self):
        first, second = self.create('wt'), self.create('wb')
        data1, dev1 = self.attach(first)
        data2, dev2 = self.attach(second)
        self.assertNotEqual(dev1['path'], dev2['path'])
        one = blockio.pattern('first ' + first.id, MIB)
        two = blockio.pattern('second ' + second.id, MIB)
        blockio.write_direct(dev1['path'], 0, one)
        blockio.write_direct(dev2['path'], 0, two)
        self.assertEqual(one, blockio.read_direct(dev1['path'], 0, MIB))
        self.assertEqual(two, blockio.read_direct(dev2['path'], 0, MIB))
        self.connector.disconnect_volume(data1, dev1)
        self.connector.disconnect_volume(data2, dev2)
        self.assertEqual(one, self.read_from_ceph(first.name, 0, MIB))
        self.assertEqual(two, self.read_from_ceph(second.name, 0, MIB))

    def test_refused_detach_keeps_device_and_data(self):
        volume = self.create('wb')
        data, device = self.attach(volume)
        payload = blockio.pattern('kept ' + volume.id, MIB)
        blockio.write_direct(device['path'], 0, payload)
        cache_id, core_id = casadm_output.core_of_exported(device['path'])
        # the data-true stand-in holds the 256 written lines dirty
        self.host.inject_fault('flush-core', exit_code=1, stderr=(
            'Error while flushing core %d of cache %d\nError while flushing '
            'data\n' % (core_id, cache_id)))
        self.assertRaises(exception.FlushFailed,
                          self.connector.disconnect_volume, data, device)
        # nothing was taken away: the guest's device still has its data
        self.assertEqual(payload, blockio.read_direct(device['path'], 0, MIB))
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        # the operator fixes the cause; the detach then completes
        self.connector.disconnect_volume(data, device)
        self.assertEqual(256, self.host.state()['flushed_blocks'])
        self.assertEqual(payload, self.read_from_ceph(volume.name, 0, MIB))


class CinderGuardsTestCase(base.CephTestCase):
    """cinder_ext's guards with cinder's real RBD driver on the cluster."""

    def snapshot(self, volume):
        snapshot = fake_snapshot.fake_snapshot_obj(
            self.context, volume_id=volume.id, volume_size=volume.size)
        snapshot.volume = volume
        return snapshot

    def test_snapshot_clone_extend_of_write_back_volume(self):
        volume = self.create('wb')
        data, device = self.attach(volume)
        payload = blockio.pattern('snap ' + volume.id, MIB)
        blockio.write_direct(device['path'], 0, payload)
        volume.status = 'in-use'
        snapshot = self.snapshot(volume)
        exc = self.assertRaises(cinder_exception.InvalidVolume,
                                self.driver.create_snapshot, snapshot)
        self.assertIn('Drain it first', str(exc))
        self.assertRaises(cinder_exception.InvalidVolume,
                          self.driver.extend_volume, volume, 2)
        self.connector.disconnect_volume(data, device)
        volume.status = 'available'

        self.driver.create_snapshot(snapshot)
        self.addCleanup(self.driver.delete_snapshot, snapshot)
        clone = self.volume('wb')
        self.driver.create_volume_from_snapshot(clone, snapshot)
        self.addCleanup(self._delete_quietly, clone)
        self.assertEqual(payload, self.read_from_ceph(clone.name, 0, MIB))

        self.driver.extend_volume(volume, 2)
        self.assertEqual(2 * 1024 * MIB, self.image_size(volume.name))


@ddt.ddt
class NovaVolumeDriverTestCase(base.CephTestCase):
    """nova_ext's libvirt volume driver on the cluster (own process)."""

    def run_nova_attach(self, volume: Any, write: bool = True
                        ) -> dict[str, Any]:
        info = self.initialize_connection(volume)
        group = base.CONF[opts.GROUP]
        request = {
            'connection_info': info,
            'host_options': {name: group[name] for name in (
                'cache_instances', 'opencas_conf', 'lock_path', 'state_path',
                'flush_timeout', 'sysfs_rbd_root')},
            'write': {'offset': 4 * MIB, 'length': MIB,
                      'label': 'nova ' + volume.id} if write else None}
        result = subprocess.run(
            [sys.executable, '-m', 'tests.ceph.nova_attach'],
            input=json.dumps(request), capture_output=True, text=True,
            timeout=300, cwd=REPO_ROOT)
        self.assertEqual(0, result.returncode, result.stderr[-3000:])
        [line] = [line for line in result.stdout.splitlines()
                  if line.startswith(nova_attach.RESULT_PREFIX)]
        return json.loads(line[len(nova_attach.RESULT_PREFIX):])

    def rbd_maps(self) -> int:
        return len(self.host.calls('rbd', 'map'))

    @ddt.data('wt', 'wb')
    def test_guest_writes_to_the_cas_device_reach_ceph(self, mode):
        volume = self.create(mode)
        result = self.run_nova_attach(volume)
        self.assertEqual('LibvirtCachedRBDVolumeDriver',
                         result['volume_driver'])
        disk = ElementTree.fromstring(result['xml'])
        self.assertEqual('block', disk.get('type'))
        path = disk.find('source').get('dev')
        self.assertTrue(path.startswith('/dev/cas'), path)
        self.assertEqual(path, result['path'])
        self.assertEqual(path, result['connection_info']['data'][
            'device_path'])
        driver = disk.find('driver')
        self.assertEqual(('none', 'native'), (driver.get('cache'),
                                              driver.get('io')))
        payload = blockio.pattern('nova ' + volume.id, MIB)
        self.assertEqual(payload, bytes.fromhex(result['read_back']))
        # disconnect_volume took everything down on the host
        self.assertEqual(1, self.rbd_maps())
        state = self.host.state()
        self.assertEqual({}, state['mappings'])
        self.assertEqual([], [core for cache in state['caches'].values()
                              for core in cache['cores']])
        self.assertEqual(0, state['dropped_dirty_blocks'])
        self.assertEqual(payload, self.read_from_ceph(volume.name, 4 * MIB,
                                                      MIB))

    def test_uncached_volume_stays_a_librbd_network_disk(self):
        volume = self.create(None)
        result = self.run_nova_attach(volume, write=False)
        self.assertEqual('LibvirtNetVolumeDriver', result['volume_driver'])
        disk = ElementTree.fromstring(result['xml'])
        self.assertEqual('network', disk.get('type'))
        source = disk.find('source')
        self.assertEqual(('rbd', '%s/%s' % (base.POOL, volume.name)),
                         (source.get('protocol'), source.get('name')))
        self.assertEqual(0, self.rbd_maps())
