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

import ddt

from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas import volume
from tests.unit.os_brick_cas import base


@ddt.ddt
class ConnectionPropertiesTestCase(base.TestCase):

    def test_cached(self):
        vol = volume.from_connection_properties(
            {'name': 'volumes/volume-1', 'cacheable': True,
             'cache_mode': 'wb', 'volume_id': '1'})
        self.assertEqual(('volumes', 'volume-1', True,
                          modes.CacheMode.WRITE_BACK),
                         (vol.pool, vol.image, vol.cacheable, vol.mode))
        self.assertIn('volumes/volume-1', vol.label)

    @ddt.data(True, 'True', '<is> True', 'true')
    def test_cacheable_spellings_default_to_write_through(self, flag):
        vol = volume.from_connection_properties(
            {'name': 'volumes/v', 'cacheable': flag})
        self.assertEqual(modes.CacheMode.WRITE_THROUGH, vol.mode)

    def test_not_cacheable(self):
        vol = volume.from_connection_properties({'name': 'volumes/v'})
        self.assertFalse(vol.cacheable)
        self.assertIsNone(vol.mode)

    def test_cache_share(self):
        vol = volume.from_connection_properties(
            {'name': 'volumes/v', 'cacheable': True, 'cache_share': 25})
        self.assertEqual(25, vol.share)
        self.assertIsNone(volume.from_connection_properties(
            {'name': 'volumes/v', 'cacheable': True}).share)
        # an uncached volume has no cache to share
        self.assertIsNone(volume.from_connection_properties(
            {'name': 'volumes/v', 'cache_share': 25}).share)

    @ddt.data(0, 101, '25', 0.25, True)
    def test_malformed_cache_share(self, share):
        exc = self.assertRaises(exception.InvalidConnectionInfo,
                                volume.from_connection_properties,
                                {'name': 'volumes/v', 'cacheable': True,
                                 'cache_share': share})
        self.assertIn('cache share', str(exc))

    @ddt.data(
        None, [], {},
        {'name': 'volumes'},
        {'name': 'a/b/c/d'},
        {'name': 'volumes/v\n', 'cacheable': True},
        {'name': 'volumes/..', 'cacheable': True},
        {'name': './v', 'cacheable': True},
        {'name': 'volumes/.v', 'cacheable': True},
        {'name': 'volumes/-v'},
        {'name': '../x/v'},
        {'name': 'volumes/v', 'cacheable': 'perhaps'},
        {'name': 'volumes/v', 'cacheable': True, 'cache_mode': 'wx'},
        {'name': 'volumes/v', 'cacheable': True, 'cache_mode': 'WB'},
    )
    def test_malformed(self, props):
        exc = self.assertRaises(exception.InvalidConnectionInfo,
                                volume.from_connection_properties, props)
        self.assertIn('Malformed RBD connection information', str(exc))
