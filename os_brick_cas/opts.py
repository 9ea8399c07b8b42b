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

"""Configuration options of the host library, group ``[os_brick_cas]``."""

import copy
import itertools

from oslo_config import cfg
from oslo_privsep import priv_context


GROUP = 'os_brick_cas'
PRIVSEP_GROUP = 'privsep_os_brick_cas'
PRIVSEP_FLUSH_GROUP = 'privsep_os_brick_cas_flush'

FALLBACK_FAIL = 'fail'
FALLBACK_CLEAN_MODE = 'clean-mode'
FALLBACK_UNCACHED = 'uncached'

host_opts = [
    cfg.DictOpt(
        'cache_instances',
        default={},
        help='Which Open CAS cache instance serves each cache mode on this '
             'host, as mode:cache_id pairs, e.g. "wt:1,wb:2". Modes are '
             'wt, wb, wa, wo and pt. The cache mode is a property of the '
             'instance, so each offered mode needs its own instance; the '
             'mode casadm reports for the instance must match.'),
    cfg.StrOpt(
        'fallback_policy',
        default=FALLBACK_FAIL,
        choices=[
            (FALLBACK_FAIL, 'Fail the attach when the requested mode has no '
                            'usable instance.'),
            (FALLBACK_CLEAN_MODE, 'Use an instance in a mode that never holds '
                                  'dirty data (wt, then wa, then pt); never '
                                  'falls back towards wb or wo.'),
            (FALLBACK_UNCACHED, 'Attach the volume through krbd without a '
                                'cache.'),
        ],
        help='What to do when the host has no usable cache instance for the '
             'mode a volume asks for.'),
    cfg.ListOpt(
        'accepted_data_loss_defects',
        default=[],
        help='Open CAS defects known to lose acknowledged writes '
             '(doc/source/admin/opencas-hit-invalid-race.rst) that the '
             'operator accepts on this '
             'host, by key, e.g. ocf-hit-invalid-backfill. While the loaded '
             'Open CAS release has such a defect for a mode, os-brick-cas '
             'does not offer that mode: new attaches follow fallback_policy, '
             'doctor fails and nova reports no trait for it. Volumes already '
             'cached keep working (re-attach, flush, detach). Accept a '
             'defect only once you know your guests cannot trigger it.'),
    cfg.IntOpt(
        'flush_timeout',
        default=600,
        min=1,
        help='Seconds a detach waits for a core\'s dirty data to be flushed '
             'to Ceph. When it runs out the detach fails and the core, its '
             'dirty data and the RBD mapping stay in place.'),
    cfg.IntOpt(
        'udev_settle_timeout',
        default=30,
        min=0,
        help='Seconds an attach waits ("udevadm settle") for udev to finish '
             'with the devices it just made (the krbd mapping, then the '
             'Open CAS /dev/casX-Y) before the guest gets the path: udev\'s '
             'probes and Open CAS\'s loader must not race the first writes. '
             'A udev that does not settle in time costs a warning, not the '
             'attach. 0 skips the wait (not recommended).'),
    cfg.IntOpt(
        'casadm_timeout',
        default=60,
        min=1,
        help='Seconds any casadm call other than a flush (list, add, '
             're-activate, remove an inactive core, statistics, version) may '
             'take. casadm ignores SIGINT outside a flush, so a call that '
             'runs out of time is killed (SIGKILL) and the operation fails '
             'with an error; its locks and its privsep worker are released.'),
    cfg.IntOpt(
        'rbd_timeout',
        default=120,
        min=1,
        help='Seconds an "rbd map" or "rbd unmap" of a cached volume may '
             'take before it is killed (SIGKILL) and the attach or detach '
             'fails. A map that completes after the kill is found and '
             'unmapped again.'),
    cfg.IntOpt(
        'lock_timeout',
        default=900,
        min=1,
        help='Seconds an attach or detach waits for the lock of its volume '
             'or of a cache instance (held by another attach, detach or '
             'flush on this host) before it fails with an error saying '
             'what holds it. Keep it above flush_timeout plus a few '
             'casadm_timeout, since a detach may wait for another '
             "volume's flush on the same instance. A drain or undrain "
             '(nova\'s live-migration pre-check and snapshot quiesce, the '
             'CLI) waits at most what is left of its own time bound '
             '([os_brick_cas_nova] live_migration_drain_timeout, '
             'snapshot_drain_timeout, or --timeout) when that is shorter.'),
    cfg.StrOpt(
        'opencas_conf',
        default='/etc/opencas/opencas.conf',
        help='Open CAS configuration file. Cores of write-back and '
             'write-only instances are recorded there with '
             'lazy_startup=true while attached, so a host reboot reloads '
             'their dirty data without waiting for the RBD device.'),
    cfg.StrOpt(
        'sysfs_rbd_root',
        default='/sys/bus/rbd/devices',
        help='Where krbd publishes each mapped device (pool, pool_ns, '
             'name, snap, cluster_fsid). Before any add, re-activation, '
             'flush, removal or unmap os-brick-cas checks there that the '
             'device behind a link is the volume\'s image. Change it only '
             'for tests.'),
    cfg.StrOpt(
        'state_path',
        default='/var/lib/os-brick-cas',
        help='Directory of the host-side ownership records: for each core '
             'os-brick-cas adds, the Cinder attachment (epoch) whose data '
             'it caches. Only that attachment reuses the core, and only the '
             'owner named by the volume\'s fence marker writes its dirty '
             'data to Ceph. Keep it on persistent storage.'),
    cfg.StrOpt(
        'host_layout',
        default='/etc/os-brick-cas/host-layout.yaml',
        help='YAML file listing the Open CAS cache instances of this host '
             '(id, mode, cache device, cache line size, cleaning, promotion '
             'and sequential cut-off parameters, flush rate) for '
             '"os-brick-cas host plan|apply|check" and doctor. See '
             'etc/host-layout.yaml.sample and the admin guide\'s "Tuning" '
             'for the defaults per mode.'),
    cfg.StrOpt(
        'host_root',
        default='/',
        help='Root under which "os-brick-cas host" reads proc/meminfo and '
             'sys/class/block/<device>/size, and doctor looks for the '
             'systemd units. Change it only for tests.'),
    cfg.ListOpt(
        'nova_compute_units',
        default=['nova-compute.service', 'openstack-nova-compute.service',
                 'devstack@n-cpu.service',
                 'kolla-nova_compute-container.service'],
        help='systemd units that may run nova-compute on this host; doctor '
             'checks that each one installed is ordered after Open CAS\'s '
             'open-cas.service (etc/systemd/nova-compute.service.d/'
             'os-brick-cas.conf).'),
    cfg.StrOpt(
        'lock_path',
        help='Directory for the per-volume and per-cache-instance lock '
             'files. Defaults to [oslo_concurrency] lock_path.'),
    cfg.StrOpt(
        'service_group',
        default='nova',
        help='Group (name or gid) nova-compute runs as. The directories '
             'shared by nova-compute and the os-brick-cas CLI '
             '(state_path/lifecycle, state_path/events and lock_path) are '
             'owned by root, of this group, mode 2770; whoever creates one '
             'first creates it so, and doctor checks it (admin guide, '
             '"Shared directories"). kolla: 42436.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the host options on *conf*."""
    conf.register_opts(host_opts, group=GROUP)


def list_opts():
    """Options for oslo-config-generator (namespace ``os_brick_cas``).

    The exporter's options have their own namespace,
    ``os_brick_cas.metrics`` (:mod:`os_brick_cas.metrics.opts`), so this
    leaf of the library imports nothing of it.

    Includes the sections of the two os-brick-cas privsep daemons (short
    calls, and flushes on their own workers), which oslo.privsep registers
    when a context is first used.
    """
    return [(GROUP, itertools.chain(host_opts)),
            (PRIVSEP_GROUP, copy.deepcopy(priv_context.OPTS)),
            (PRIVSEP_FLUSH_GROUP, copy.deepcopy(priv_context.OPTS))]


register_opts(cfg.CONF)
