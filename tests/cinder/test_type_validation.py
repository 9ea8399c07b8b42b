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

"""Extra specs are validated when a type is written (cinder API + DB)."""

from cinder import context
from cinder.tests.unit.api import fakes
from cinder.tests.unit import test
from cinder.tests.unit import utils
import webob

from cinder_ext.api import type_validation


class TypeValidationTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.admin = context.get_admin_context()
        self.type = utils.create_volume_type(
            self.admin, self, name='cas-wb',
            extra_specs={'cacheable': '<is> True'})
        self.req = fakes.HTTPRequest.blank('/v3/types', use_admin_context=True)

    def pre_process(self, generator):
        """Run the pre-processing half, as cinder's wsgi layer does."""
        return next(generator)

    def test_mode_added_to_cacheable_type_passes(self):
        ext = type_validation.ExtraSpecsValidation()
        self.assertIsNone(self.pre_process(ext.create(
            self.req, self.type.id, {'extra_specs': {
                'cas:cache_mode': 'wb'}})))

    def test_merged_specs_are_checked(self):
        ext = type_validation.ExtraSpecsValidation()
        exc = self.assertRaises(webob.exc.HTTPBadRequest, self.pre_process,
                                ext.create(self.req, self.type.id, {
                                    'extra_specs': {
                                        'multiattach': '<is> True'}}))
        self.assertIn("'cacheable' and 'multiattach'", exc.explanation)
        exc = self.assertRaises(webob.exc.HTTPBadRequest, self.pre_process,
                                ext.update(self.req, self.type.id,
                                           'cas:cache_mode',
                                           {'cas:cache_mode': 'fast'}))
        self.assertIn('allowed values are wt, wb, wa, wo, pt',
                      exc.explanation)

    def test_type_create_with_specs(self):
        ext = type_validation.TypesValidation()
        exc = self.assertRaises(webob.exc.HTTPBadRequest, self.pre_process,
                                ext.create(self.req, {'volume_type': {
                                    'name': 'x', 'extra_specs': {
                                        'cas:cache_mode': 'wt'}}}))
        self.assertIn("needs 'cacheable'", exc.explanation)
        self.assertIsNone(self.pre_process(ext.create(self.req, {
            'volume_type': {'name': 'y'}})))
