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

"""oslo.policy rules of the fence API extension (policy in code).

Registered into cinder's own enforcer the first time the extension checks
one, so cinder's policy file (``/etc/cinder/policy.yaml``) overrides them
like cinder's rules. Sample: ``etc/cinder/os-brick-cas-policy.yaml.sample``
(``tox -e genpolicy``). This module imports no cinder code: the sample
generator loads it through the ``oslo.policy.policies`` entry point.
"""

from oslo_policy import policy

PREFIX = 'os-brick-cas:fence:%s'
SET = PREFIX % 'set'
CLEAR = PREFIX % 'clear'
SHOW = PREFIX % 'show'
#: cloud administrators, and the service users nova-compute acts as
ADMIN_OR_SERVICE = 'rule:admin_api or role:service'

_ACTION_PATH = '/volumes/{volume_id}/action'

RULES = [
    policy.DocumentedRuleDefault(
        name=SET,
        check_str=ADMIN_OR_SERVICE,
        description='Set the os-brick-cas fence marker of a volume (the '
                    'compute host whose cache may hold writes Ceph does not '
                    'have). nova-compute sets it when it attaches a '
                    'write-back or write-only cached volume. The guards '
                    'read the marker for every request, a user\'s too; '
                    'only this rule lets a request change it.',
        operations=[{'method': 'POST',
                     'path': _ACTION_PATH + ' (os-brick-cas-set-fence)'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=CLEAR,
        check_str=ADMIN_OR_SERVICE,
        description='Clear the os-brick-cas fence marker of a volume. '
                    'nova-compute clears it after a clean detach; an '
                    'operator only after the host\'s dirty data was '
                    'flushed or knowingly discarded.',
        operations=[{'method': 'POST',
                     'path': _ACTION_PATH + ' (os-brick-cas-clear-fence)'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=ADMIN_OR_SERVICE,
        description='See the os-brick-cas:fence, os-brick-cas:fence-epoch, '
                    'os-brick-cas:fence-drained and os-brick-cas:fence-lost '
                    'attributes in volume show and detail responses '
                    '(nova-compute and the os-brick-cas CLI read the marker '
                    'there).',
        operations=[{'method': 'GET', 'path': '/volumes/{volume_id}'},
                    {'method': 'GET', 'path': '/volumes/detail'}],
        scope_types=['project']),
]


def list_rules() -> list[policy.DocumentedRuleDefault]:
    """The rules, for cinder's enforcer and oslopolicy-sample-generator."""
    return RULES
