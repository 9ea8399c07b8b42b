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


"""Differences between the cinder releases' in-tree test fixtures.

cinder_ext itself runs unchanged on every supported release; only cinder's
test helpers differ. Each branch names its release (release detection:
:mod:`os_brick_cas.compat`).
"""

from cinder.tests.unit.api import fakes
from cinder.tests.unit import fake_constants as fake

from os_brick_cas import compat

RELEASE = compat.release_of('cinder')


def request(path: str, roles: list, admin: bool = False):
    """cinder's fake API request whose context carries *roles*."""
    if compat.at_least(RELEASE, '2026.2'):
        return fakes.HTTPRequest.blank(path, use_admin_context=admin,
                                       roles=roles)
    # 2025.1 (cinder 26), 2026.1 (cinder 28): blank() takes no roles
    req = fakes.HTTPRequest.blank(path, use_admin_context=admin)
    req.environ['cinder.context'] = fakes.FakeRequestContext(
        fake.USER_ID, fake.PROJECT_ID, is_admin=admin, roles=roles)
    return req
