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

"""Cinder API extension: validate the os-brick-cas extra specs on write.

Refuses a volume type (or an extra-spec update) that breaks the contract
in :mod:`cinder_ext.extra_specs` when it is written, so a bad type never
reaches a compute host. Enable with::

    osapi_volume_extension = cinder_ext.api.type_validation.TypeValidation
"""

from cinder.api import extensions
from cinder.api.openstack import wsgi
from cinder.volume import volume_types
import webob

from cinder_ext import extra_specs


def _check(specs: dict) -> None:
    try:
        extra_specs.validate(specs)
    except extra_specs.ExtraSpecError as exc:
        raise webob.exc.HTTPBadRequest(explanation=str(exc))


def _merged(type_id: str, new_specs: dict) -> dict:
    merged = dict(volume_types.get_volume_type_extra_specs(type_id) or {})
    merged.update(new_specs or {})
    return merged


class ExtraSpecsValidation(wsgi.Controller):
    """Pre-processing of extra-spec create/update."""

    @wsgi.extends
    def create(self, req, type_id, body):
        _check(_merged(type_id, (body or {}).get('extra_specs')))
        yield

    @wsgi.extends
    def update(self, req, type_id, id, body):
        _check(_merged(type_id, body or {}))
        yield


class TypesValidation(wsgi.Controller):
    """Pre-processing of volume type create with extra specs."""

    @wsgi.extends
    def create(self, req, body):
        _check(((body or {}).get('volume_type') or {}).get('extra_specs')
               or {})
        yield


class TypeValidation(extensions.ExtensionDescriptor):
    """Validate os-brick-cas extra specs (cacheable, cas:cache_*)."""

    name = 'OsBrickCasTypeValidation'
    alias = 'os-brick-cas-type-validation'
    updated = '2026-11-01T00:00:00+00:00'

    def get_controller_extensions(self):
        return [
            extensions.ControllerExtension(self, 'extra_specs',
                                           ExtraSpecsValidation()),
            extensions.ControllerExtension(self, 'types', TypesValidation()),
        ]
