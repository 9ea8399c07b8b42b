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


@ddt.ddt
class ShareTestCase(testtools.TestCase):
    """cas:cache_share: a whole percent of the cache instance, 1..100."""

    @ddt.data(('1', 1), ('25', 25), ('25%', 25), (' 40 % ', 40),
              ('100', 100))
    @ddt.unpack
    def test_accepted_forms(self, raw, percent):
        spec = specs.validate({'cacheable': '<is> True',
                               'cas:cache_mode': 'wb',
                               'cas:cache_share': raw})
        self.assertEqual(specs.CacheSpec(True, 'wb', percent), spec)

    def test_default_mode_takes_a_share(self):
        self.assertEqual(specs.CacheSpec(True, 'wt', 10), specs.validate(
            {'cacheable': '<is> True', 'cas:cache_share': '10'}))

    def test_unset_is_none(self):
        self.assertIsNone(specs.validate({'cacheable': '<is> True'}).share)

    @ddt.data('0', '101', '0.25', '1.0', '-5', 'half', '', '%', '\u0663')
    def test_unknown_form_or_out_of_range(self, raw):
        exc = self.assertRaises(specs.ExtraSpecError, specs.validate,
                                {'cacheable': '<is> True',
                                 'cas:cache_share': raw})
        self.assertIn("'cas:cache_share' is %r; allowed values are whole "
                      "percents of the cache instance from 1 to 100" % raw,
                      str(exc))

    @ddt.data({}, {'cacheable': '<is> False'})
    def test_without_a_cache_refused(self, base):
        exc = self.assertRaises(specs.ExtraSpecError, specs.validate,
                                dict(base, **{'cas:cache_share': '10'}))
        self.assertIn("'cas:cache_share' needs 'cacheable' set to "
                      "'<is> True'", str(exc))

    def test_pass_through_refused(self):
        exc = self.assertRaises(specs.ExtraSpecError, specs.validate,
                                {'cacheable': '<is> True',
                                 'cas:cache_mode': 'pt',
                                 'cas:cache_share': '10'})
        self.assertIn("needs a caching mode: 'cas:cache_mode' is 'pt'",
                      str(exc))
