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

"""tempest.conf options of the os-brick-cas plugin."""

from oslo_config import cfg

GROUP = 'os_brick_cas_tempest'

group = cfg.OptGroup(name=GROUP,
                     title='os-brick-cas cached volume test options')

opts = [
    cfg.BoolOpt('enabled', default=False,
                help='Run the os-brick-cas tests: the cloud attaches '
                     'cacheable RBD volumes through Open CAS.'),
    cfg.ListOpt('offered_modes', default=['wt', 'wb'],
                help='Open CAS cache modes the compute hosts offer (wt, '
                     'wb, wa, wo, pt); tests of other modes are skipped.'),
    cfg.DictOpt('volume_types', default={'wt': 'cas-wt', 'wb': 'cas-wb'},
                help='Volume type name per cache mode, as mode:name.'),
    cfg.BoolOpt('compute_host_access', default=False,
                help='Whether the tests may ssh to compute hosts to check '
                     'the Open CAS device while a volume is attached.'),
    cfg.StrOpt('compute_ssh_user', default='stack',
               help='User for ssh to compute hosts (needs sudo casadm).'),
    cfg.StrOpt('compute_ssh_key_file',
               help='Private key for ssh to compute hosts.'),
]
