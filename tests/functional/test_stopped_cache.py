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

"""A cache listed in opencas.conf but not running may hold newer data.

Issue 13 (a): after a reboot with the write-back instance not loaded (SSD
failed, or casctl ran after nova-compute), a detach found no core and
reported success, and an attach fell back to librbd: the guest ran on
Ceph without its newest writes, which the cache could later write over
newer data. Both are refused now, and nothing is mapped or forgotten.
"""

from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
from tests.functional import base


class StoppedCacheTestCase(base.FunctionalTestCase):

    def dirty_volume_whose_cache_did_not_load(self, name: str):
        props = self.props(self.image(name), 'wb')
        self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 48)
        self.host.reboot(not_started=[core.cache_id])
        self.assertNotIn(core.cache_id,
                         [cache.cache_id for cache in self.cache_list()])
        return props, core

    def assert_kept(self, core) -> None:
        self.assertEqual([], self.mappings())
        self.assertTrue(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id, core.device))

    def test_detach_and_attach_refused_until_the_cache_loads(self):
        props, core = self.dirty_volume_whose_cache_did_not_load('volume-sc')
        rbd_calls = len(self.host.calls('rbd'))
        exc = self.assertRaises(exception.CachedDataMayBeNewer,
                                self.connector.disconnect_volume, props, None)
        self.assertIn('cache instance %d, which is not running'
                      % core.cache_id, str(exc))
        self.assert_kept(core)
        exc = self.assertRaises(exception.CachedDataMayBeNewer,
                                self.connector.connect_volume, props)
        self.assertIn('casctl start', str(exc))
        self.assert_kept(core)
        self.assertEqual([], [call['argv'] for call in
                              self.host.calls('rbd')[rbd_calls:]
                              if call['argv'][1] != 'showmapped'])
        # once the cache is loaded its inactive core comes back with data
        self.host.load_cache(core.cache_id)
        info = self.connector.connect_volume(props)
        [again] = self.cores()
        self.assertEqual((core.cache_id, core.core_id, 48),
                         (again.cache_id, again.core_id, self.dirty(again)))
        self.connector.disconnect_volume(props, info)
        self.assertEqual(48, self.host.state()['flushed_blocks'])
        self.assert_clean_host()

    def test_without_open_cas_a_listed_volume_is_refused_not_fallen_back(self):
        """nova_ext falls back to librbd on CasModuleNotLoaded: not here."""
        props, core = self.dirty_volume_whose_cache_did_not_load('volume-nm')
        self.host.set_module_loaded(False)
        exc = self.assertRaises(exception.CachedDataMayBeNewer,
                                self.connector.connect_volume, props)
        self.assertIn('not usable', str(exc))
        self.assertRaises(exception.CachedDataMayBeNewer,
                          self.connector.disconnect_volume, props, None)
        self.assert_kept(core)

    def test_other_volumes_are_not_held_up(self):
        self.dirty_volume_whose_cache_did_not_load('volume-held')
        props = self.props(self.image('volume-free'), 'wt')
        info = self.connector.connect_volume(props)
        self.connector.disconnect_volume(props, info)
