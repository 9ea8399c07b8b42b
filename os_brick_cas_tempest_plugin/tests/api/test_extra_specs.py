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

"""Cinder validates the cache-mode extra specs whenever a type is written.

``cacheable='<is> True'`` with ``cas:cache_mode`` in wt/wb/wa/wo/pt is
accepted; an unknown mode, a mode without ``cacheable`` and ``cacheable``
together with ``multiattach`` are refused with HTTP 400, both when the
type is created and when extra specs are added or changed later.
"""

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
        reason = helpers.feature_skip_reason(CONF.os_brick_cas_tempest.enabled)
        if reason:
            raise cls.skipException(reason)

    def _specs(self, volume_type):
        return self.admin_volume_types_client.list_volume_types_extra_specs(
            volume_type['id'])['extra_specs']

    def _assert_refused(self, call, *args, **kwargs):
        self.assertRaises(lib_exc.BadRequest, call, *args, **kwargs)

    @decorators.idempotent_id('830700ee-7a13-454c-9a9d-c7ab7dc1d58f')
    def test_type_per_cache_mode_accepted(self):
        for mode in helpers.ALL_MODES:
            volume_type = self.create_volume_type(
                extra_specs=helpers.volume_type_extra_specs(mode))
            specs = self._specs(volume_type)
            self.assertEqual(helpers.TRUE, specs.get(helpers.CACHEABLE))
            self.assertEqual(mode, specs.get(helpers.CACHE_MODE))

    @decorators.idempotent_id('ec84be58-4c4a-4e63-9d4b-79b508e04022')
    def test_cacheable_without_mode_accepted(self):
        volume_type = self.create_volume_type(
            extra_specs={helpers.CACHEABLE: helpers.TRUE})
        self.assertEqual({helpers.CACHEABLE: helpers.TRUE},
                         {key: value for key, value
                          in self._specs(volume_type).items()
                          if key in (helpers.CACHEABLE, helpers.CACHE_MODE)})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('06b1421c-f09d-4d01-9a92-d564062f9efb')
    def test_unknown_cache_mode_refused(self):
        for value in ('writeback', 'WB', 'wx', 'wt,wb'):
            self._assert_refused(
                self.create_volume_type,
                extra_specs={helpers.CACHEABLE: helpers.TRUE,
                             helpers.CACHE_MODE: value})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('0e4b4b7e-30fb-45e0-a056-50076afa4609')
    def test_cache_mode_without_cacheable_refused(self):
        self._assert_refused(self.create_volume_type,
                             extra_specs={helpers.CACHE_MODE: 'wt'})
        self._assert_refused(self.create_volume_type,
                             extra_specs={helpers.CACHEABLE: '<is> False',
                                          helpers.CACHE_MODE: 'wb'})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('c8d9d485-4d8a-4c22-a3a8-7ebc1b7a89b5')
    def test_cacheable_multiattach_type_refused(self):
        for mode in (None, 'wt', 'wb'):
            specs = {helpers.CACHEABLE: helpers.TRUE,
                     helpers.MULTIATTACH: helpers.TRUE}
            if mode:
                specs[helpers.CACHE_MODE] = mode
            self._assert_refused(self.create_volume_type, extra_specs=specs)

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('5bcbdce7-7b0b-41dc-93ce-e210f297f02c')
    def test_invalid_change_of_cached_type_refused(self):
        volume_type = self.create_volume_type(
            extra_specs=helpers.volume_type_extra_specs('wt'))
        client = self.admin_volume_types_client
        self._assert_refused(client.create_volume_type_extra_specs,
                             volume_type['id'],
                             {helpers.CACHE_MODE: 'fast'})
        self._assert_refused(client.update_volume_type_extra_specs,
                             volume_type['id'], helpers.CACHE_MODE,
                             {helpers.CACHE_MODE: 'bogus'})
        self._assert_refused(client.create_volume_type_extra_specs,
                             volume_type['id'],
                             {helpers.MULTIATTACH: helpers.TRUE})
        specs = self._specs(volume_type)
        self.assertEqual('wt', specs.get(helpers.CACHE_MODE))
        self.assertNotIn(helpers.MULTIATTACH, specs)

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('19a11f23-e8ee-417f-9018-d793732bec14')
    def test_cache_mode_added_to_plain_type_refused(self):
        volume_type = self.create_volume_type()
        self._assert_refused(
            self.admin_volume_types_client.create_volume_type_extra_specs,
            volume_type['id'], {helpers.CACHE_MODE: 'wb'})
        self.assertNotIn(helpers.CACHE_MODE, self._specs(volume_type))

    @decorators.idempotent_id('e130e848-0107-4085-892c-93caf44e5803')
    def test_configured_types_ask_for_their_mode(self):
        """Each offered mode's configured type exists with that mode."""
        group = CONF.os_brick_cas_tempest
        types = {volume_type['name']: volume_type for volume_type in
                 self.admin_volume_types_client.list_volume_types(
                     is_public='None')['volume_types']}
        for mode in group.offered_modes:
            try:
                name = helpers.volume_type_for_mode(group.volume_types, mode)
            except helpers.ConfigurationError as exc:
                raise lib_exc.InvalidConfiguration(str(exc)) from None
            self.assertIn(name, types, 'volume type %s of mode %s does not '
                          'exist' % (name, mode))
            specs = self._specs(types[name])
            self.assertEqual(helpers.TRUE, specs.get(helpers.CACHEABLE),
                             'volume type %s is not cacheable' % name)
            self.assertEqual(mode, specs.get(helpers.CACHE_MODE, 'wt'),
                             'volume type %s asks for another mode' % name)
