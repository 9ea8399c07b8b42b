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

from os_brick import caches
from os_brick import exception as brick_exception

import fixtures

from os_brick_cas import engine
from os_brick_cas import exception
from tests.unit.os_brick_cas import base

LINK = '/dev/disk/by-id/rbd-volumes-volume-1'


class EngineTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(base.FakeCasadm())
        # krbd identity (sysfs) is covered by test_identity and the
        # functional tier; here the device behind a link is taken as right
        for name in ('verify_device', 'verify_link'):
            self.useFixture(fixtures.MockPatch(
                'os_brick_cas.identity.' + name))
        self.set_instances('wt:1')
        self.fake.reply('--version', (0, base.sample('version_V_csv.txt'),
                                      ''))
        self.fake.reply('--list-caches', (0, base.list_csv(
            'cache,1,/dev/nvme0n1p1,Running,wt,-'), ''))
        engine.register()
        self.addCleanup(caches.CACHE_ENGINE_TO_CACHE_CLASS_MAP.pop,
                        engine.ENGINE_NAME)

    def manager(self, device_path: str = LINK) -> caches.CacheManager:
        info = {'driver_volume_type': 'rbd',
                'data': {'device_path': device_path, 'cacheable': True,
                         'volume_id': 'v1'}}
        return caches.CacheManager(None, info,
                                   cache_name=engine.ENGINE_NAME,
                                   cache_mode='wt')

    def test_cache_manager_drives_attach_and_detach(self):
        self.fake.reply('--add-core', (
            0, 'Successfully added core 4 to cache instance 1\n', ''))
        # every attach and detach reads the IO-class table (cache shares,
        # a class an earlier core 4 left): the default one here
        self.fake.reply('--io-class --list', (
            0, 'IO class id,IO class name,Eviction priority,Allocation\n'
               '0,unclassified,255,1.00\n', ''))
        manager = self.manager()
        self.assertEqual('/dev/cas1-4', manager.attach_volume())
        self.assertEqual([['--add-core', '--cache-id', '1', '--core-device',
                           LINK]], self.fake.argv_of('--add-core'))
        self.fake.reply('--list-caches', (0, base.list_csv(
            'cache,1,/dev/nvme0n1p1,Running,wt,-',
            'core,4,%s,Active,-,/dev/cas1-4' % LINK), ''))
        self.fake.reply('--stats', (0, 'Dirty [4KiB Blocks]\n0\n', ''))
        self.fake.reply('--remove-core', (0, '', ''))
        detach = self.manager('/dev/cas1-4')
        self.assertEqual(LINK, detach.detach_volume())
        self.assertEqual([['--remove-core', '--cache-id', '1', '--core-id',
                           '4']], self.fake.argv_of('--remove-core'))
        self.assertEqual([], self.fake.argv_of('--load-config'))

    def test_not_ready_without_module(self):
        self.fake.reply('--version', (1, 'Is the kernel module loaded?\n',
                                      'Device /dev/cas_ctrl not found\n'))
        self.assertFalse(engine.OpenCasRbdEngine(cache_mode='wt')
                         .is_engine_ready())
        self.assertRaises(brick_exception.Invalid, self.manager)

    def test_not_ready_without_instance_for_mode(self):
        self.assertFalse(engine.OpenCasRbdEngine(cache_mode='wb')
                         .is_engine_ready())

    def test_refuses_paths_casadm_would_refuse(self):
        eng = engine.OpenCasRbdEngine(cache_mode='wt')
        self.assertRaises(exception.InvalidInput, eng.attach_volume,
                          dev_path='/dev/sdb')
        self.assertRaises(exception.InvalidInput, eng.attach_volume,
                          dev_path='/tmp/x')
        self.assertEqual([], self.fake.argv_of('--add-core'))

    def test_detach_unknown_device(self):
        eng = engine.OpenCasRbdEngine(cache_mode='wt')
        self.assertRaises(brick_exception.VolumeDeviceNotFound,
                          eng.detach_volume, dev_path='/dev/cas1-9')
