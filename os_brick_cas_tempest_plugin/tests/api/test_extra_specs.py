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

"""Cinder validates cache-mode extra specs when a type is written."""

from tempest.api.volume import base
from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from os_brick_cas_tempest_plugin import helpers

CONF = config.CONF


class CacheModeExtraSpecsTest(base.BaseVolumeAdminTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        reason = helpers.skip_reason(CONF.os_brick_cas_tempest)
        if reason:
            raise cls.skipException(reason)

    @decorators.idempotent_id('5a0c1b6e-9f3d-4c1e-8d7a-2e4b6c8d0f11')
    def test_valid_cache_mode_type(self):
        volume_type = self.create_volume_type(
            extra_specs=helpers.volume_type_specs('wb'))
        specs = self.admin_volume_types_client.list_volume_types_extra_specs(
            volume_type['id'])['extra_specs']
        self.assertEqual('wb', specs['cas:cache_mode'])

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('6b1d2c7f-0a4e-4d2f-9e8b-3f5c7d9e1a22')
    def test_unknown_cache_mode_rejected(self):
        self.assertRaises(lib_exc.BadRequest, self.create_volume_type,
                          extra_specs={'cacheable': '<is> True',
                                       'cas:cache_mode': 'writeback'})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('7c2e3d80-1b5f-4e30-8f9c-4a6d8e0f2b33')
    def test_cache_mode_without_cacheable_rejected(self):
        self.assertRaises(lib_exc.BadRequest, self.create_volume_type,
                          extra_specs={'cas:cache_mode': 'wt'})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('8d3f4e91-2c60-4f41-9a0d-5b7e9f1a3c44')
    def test_cacheable_multiattach_rejected(self):
        specs = dict(helpers.volume_type_specs('wt'),
                     multiattach='<is> True')
        self.assertRaises(lib_exc.BadRequest, self.create_volume_type,
                          extra_specs=specs)

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('9e405fa2-3d71-4052-8b1e-6c8f0a2b4d55')
    def test_adding_invalid_mode_to_existing_type_rejected(self):
        volume_type = self.create_volume_type(
            extra_specs=helpers.volume_type_specs('wt'))
        self.assertRaises(
            lib_exc.BadRequest,
            self.admin_volume_types_client.create_volume_type_extra_specs,
            volume_type['id'], {'cas:cache_mode': 'fast'})
