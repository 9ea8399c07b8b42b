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
import testtools

from cinder_ext import extra_specs as specs


@ddt.ddt
class ValidateTestCase(testtools.TestCase):

    @ddt.data('wt', 'wb', 'wa', 'wo', 'pt')
    def test_each_mode(self, mode):
        spec = specs.validate({'cacheable': '<is> True',
                               'cas:cache_mode': mode})
        self.assertEqual((True, mode), (spec.cacheable, spec.mode))
        self.assertEqual(mode in ('wb', 'wo'), spec.holds_dirty_data)

    def test_upstream_key_alone_means_write_through(self):
        self.assertEqual(specs.CacheSpec(True, 'wt'),
                         specs.validate({'cacheable': '<is> True'}))

    @ddt.data(None, {}, {'cacheable': '<is> False'},
              {'multiattach': '<is> True'}, {'volume_backend_name': 'x'})
    def test_uncached(self, given):
        self.assertEqual(specs.CacheSpec(False, None), specs.validate(given))

    @ddt.data(
        ({'cacheable': 'True'}, "'cacheable' is 'True'; allowed values are "
                                "'<is> True' and '<is> False'"),
        ({'cacheable': '<is> True', 'cas:cache_mode': 'writeback'},
         "'cas:cache_mode' is 'writeback'; allowed values are wt, wb, wa, "
         "wo, pt"),
        ({'cacheable': '<is> True', 'cas:cache_mode': 'WB'},
         'allowed values are wt, wb, wa, wo, pt'),
        ({'cas:cache_mode': 'wb'},
         "'cas:cache_mode' needs 'cacheable' set to '<is> True'"),
        ({'cacheable': '<is> False', 'cas:cache_mode': 'wt'},
         "needs 'cacheable'"),
        ({'cacheable': '<is> True', 'multiattach': '<is> True'},
         "'cacheable' and 'multiattach' cannot both be '<is> True'"),
    )
    @ddt.unpack
    def test_rejected_with_key_and_allowed_values(self, given, message):
        exc = self.assertRaises(specs.ExtraSpecError, specs.validate, given)
        self.assertIn(message, str(exc))
