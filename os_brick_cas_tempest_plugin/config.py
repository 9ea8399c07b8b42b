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

"""tempest.conf options of the plugin, group ``[os_brick_cas_tempest]``.

Whether live migration can be tested at all is tempest's own
``[compute-feature-enabled] live_migration`` (with
``[compute] min_compute_nodes``); it is not repeated here.
"""

from oslo_config import cfg
from oslo_config import types

from os_brick_cas_tempest_plugin import helpers

os_brick_cas_group = cfg.OptGroup(
    name='os_brick_cas_tempest',
    title='os-brick-cas cached volume options')

OsBrickCasGroup = [
    cfg.BoolOpt(
        'enabled',
        default=False,
        help='Whether the cloud under test offers Open CAS cached Cinder '
             'volumes (os-brick-cas on the compute hosts, cinder_ext on '
             'the volume service). Every test of this plugin is skipped '
             'when False.'),
    cfg.ListOpt(
        'offered_modes',
        default=['wt', 'wb'],
        item_type=types.String(choices=helpers.ALL_MODES),
        help='Open CAS cache modes the compute hosts serve (a cache '
             'instance per mode). Tests of a mode not listed here are '
             'skipped.'),
    cfg.DictOpt(
        'volume_types',
        default={'wt': 'cas-wt', 'wb': 'cas-wb'},
        help='Name of the existing Cinder volume type for each offered '
             'mode, as mode:type pairs. The type must have '
             "cacheable='<is> True' and cas:cache_mode=<mode>. An offered "
             'mode without a type here is a configuration error.'),
    cfg.BoolOpt(
        'compute_host_access',
        default=False,
        help='Whether tempest may ssh to the compute hosts to check the '
             'Open CAS device of an attached volume (runs "sudo casadm '
             '--list-caches --output-format csv --by-id-path" there). '
             'Needs compute_ssh_user and compute_ssh_key_file.'),
    cfg.StrOpt(
        'compute_ssh_user',
        help='User tempest logs in as on the compute hosts; it must be '
             'allowed to run casadm with sudo without a password.'),
    cfg.StrOpt(
        'compute_ssh_key_file',
        help='Private key file for compute_ssh_user on the compute '
             'hosts.'),
    cfg.DictOpt(
        'compute_host_addresses',
        default={},
        help='Address to ssh to for each nova compute host name, as '
             'host:address pairs. A host not listed is reached by its '
             'nova host name.'),
]


def list_opts():
    """The plugin's option groups, as (group, options) pairs."""
    return [(os_brick_cas_group, OsBrickCasGroup)]
