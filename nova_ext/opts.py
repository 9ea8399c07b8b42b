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

"""nova-compute options of os-brick-cas, group ``[os_brick_cas_nova]``.

The host cache itself is configured in ``[os_brick_cas]`` (cache
instances per mode, fallback policy, flush timeout), registered by
:mod:`os_brick_cas.opts` on the same configuration.
"""

from oslo_config import cfg

# registers [os_brick_cas] on the same configuration
from os_brick_cas import opts as host_opts  # noqa: F401

GROUP = 'os_brick_cas_nova'
NO_CACHE_FAIL = 'fail'
NO_CACHE_LIBRBD = 'librbd'

nova_opts = [
    cfg.BoolOpt(
        'enabled',
        default=False,
        help='Attach RBD volumes whose connection_info says cacheable '
             'through krbd and the Open CAS cache instance for their cache '
             'mode, as a block disk /dev/casX-Y. Other volumes keep the '
             'librbd network disk.'),
    cfg.StrOpt(
        'no_cache_action',
        default=NO_CACHE_LIBRBD,
        choices=[
            (NO_CACHE_LIBRBD, 'Attach the volume uncached as a librbd '
                              'network disk, as without os-brick-cas. '
                              'Never used for a volume whose fence marker '
                              'names this host: its newest writes may be '
                              'in the cache.'),
            (NO_CACHE_FAIL, 'Fail the attach.'),
        ],
        help='What to do with a cacheable volume when this host has no '
             'usable Open CAS cache for it (casadm missing, module not '
             'loaded, no instance for its mode and no fallback allowed by '
             '[os_brick_cas] fallback_policy).'),
    cfg.BoolOpt(
        'use_fence_marker',
        default=True,
        help='Record on the Cinder volume (admin metadata, through the '
             'cinder_ext fence API extension and nova\'s [cinder] '
             'credentials) which host holds a write-back/write-only '
             'volume, and refuse to attach it elsewhere until it was '
             'detached cleanly. Needs the extension enabled in Cinder.'),
    cfg.IntOpt(
        'live_migration_drain_timeout',
        default=45,
        min=1,
        help='Seconds the source host may spend draining the write-back/'
             'write-only volumes of a server before its live migration '
             '(flushing their dirty data and keeping new writes from '
             'getting dirty). One bound for all volumes of the server, '
             'waits for their volume and cache-instance locks included '
             '(another drain or flush on the same instance, an operator\'s '
             'CLI command). Draining runs in the source\'s pre-check, '
             'which the destination waits for over RPC, before the '
             'migration job starts (so live_migration_completion_timeout '
             'does not count it): keep it below nova\'s '
             'rpc_response_timeout (default 60) minus a few '
             'casadm_timeout. If it does not finish, the migration '
             'is refused before it starts and the volumes cache writes '
             'again; drain them ahead with "os-brick-cas drain --volume '
             'ID" (nothing is lost either way).'),
    cfg.IntOpt(
        'snapshot_drain_timeout',
        default=30,
        min=1,
        help='Seconds a host may spend draining the write-back/write-only '
             'volumes of a volume-backed server for its snapshot. One bound '
             'for all volumes of the server, waits for their volume and '
             'cache-instance locks included. The guest\'s filesystems are '
             'frozen (quiesced) meanwhile, and nova\'s API waits for it '
             'over RPC: keep it well below rpc_response_timeout (default '
             '60) minus a few casadm_timeout, and below what the guest\'s '
             'applications '
             'tolerate. If it does not finish, the guest is thawed, the '
             'volumes cache writes again (nothing is lost) and the '
             'snapshot fails; drain them ahead with "os-brick-cas drain '
             '--volume ID" and retry.'),
]

CONF = cfg.CONF
CONF.register_opts(nova_opts, group=GROUP)


def list_opts():
    """Options for oslo-config-generator (namespace os_brick_cas.nova)."""
    return [(GROUP, nova_opts)]
