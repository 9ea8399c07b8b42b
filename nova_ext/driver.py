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

"""LibvirtDriver subclass: the one place os-brick-cas hooks into nova.

nova loads ``compute_driver`` as ``nova.virt.<value>``; ``os-brick-cas
nova-shim install`` writes a two-line module ``nova/virt/
os_brick_cas_libvirt.py`` importing this class, so nova.conf says::

    [DEFAULT]
    compute_driver = os_brick_cas_libvirt.CachedRBDLibvirtDriver

Overridden: ``_get_volume_driver`` (connect, disconnect, get_config and
extend all go through it), ``init_host`` (resolve life-cycle transitions
a stopped nova-compute left), the live-migration checks and rollback (drain
write-back volumes before, undrain after a failure), ``swap_volume``
(drain the old volume), ``quiesce``/``unquiesce`` (drain write-back
volumes for the snapshot of a volume-backed server) and
``update_provider_tree`` (CUSTOM_OPENCAS_<MODE> traits). Start-up fails
with a clear message if the installed nova lacks any of them.
"""

import inspect
from typing import Optional

from nova.compute import power_state
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.virt import driver as virt_driver
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import cfg
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import excutils

from nova_ext import compat
from nova_ext import opts
from nova_ext import volume as cached_volume
from nova_ext import volume_lifecycle
from os_brick_cas import cache as cas_cache
from os_brick_cas import exception as cas_exception
from os_brick_cas import lifecycle as cas_lifecycle
from os_brick_cas import modes as cas_modes
from os_brick_cas import volume as cas_volume

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
TRAIT_PREFIX = 'CUSTOM_OPENCAS_'

#: nova methods overridden here, with the parameters this code relies on
#: in the newest release (nova_ext.compat.signatures: the older ones)
OVERRIDDEN = {
    '_get_volume_driver': ['self', 'connection_info'],
    'init_host': ['self', 'host'],
    'check_can_live_migrate_source': ['self', 'context', 'instance',
                                      'dest_check_data',
                                      'block_device_info'],
    'update_provider_tree': ['self', 'provider_tree', 'nodename',
                             'allocations'],
    'swap_volume': ['self', 'context', 'old_connection_info',
                    'new_connection_info', 'instance', 'mountpoint',
                    'resize_to'],
    'rollback_live_migration_at_source': ['self', 'context', 'instance',
                                          'migrate_data'],
    'check_can_live_migrate_destination': [
        'self', 'context', 'instance', 'src_compute_info',
        'dst_compute_info', 'block_migration', 'disk_over_commit'],
    'quiesce': ['self', 'context', 'instance', 'image_meta'],
    'unquiesce': ['self', 'context', 'instance', 'image_meta'],
}


class SnapshotDrainFailed(RuntimeError):
    """A volume could not be drained under the snapshot's quiesce.

    Not a NovaException on purpose: nova's snapshot_volume_backed goes on
    unquiesced after one (and would snapshot other volumes first); any
    other error makes it thaw the guest and fail the snapshot.
    """


class IncompatibleNova(RuntimeError):
    """The installed nova lacks a method os-brick-cas overrides."""


def check_nova_compatibility(base=libvirt_driver.LibvirtDriver) -> None:
    """Fail fast if *base* lacks a method (or parameter) we override."""
    problems = []
    for name, params in compat.signatures(OVERRIDDEN).items():
        method = getattr(base, name, None)
        if method is None:
            problems.append('%s is missing' % name)
            continue
        actual = list(inspect.signature(method).parameters)
        if actual != params:
            problems.append('%s(%s) is now %s(%s)' % (
                name, ', '.join(params), name, ', '.join(actual)))
    if problems:
        raise IncompatibleNova(
            'os-brick-cas cannot run on this nova: %s. Install an '
            'os-brick-cas release made for this nova, or set compute_driver '
            'back to libvirt.LibvirtDriver (cached volumes then attach '
            'uncached).' % '; '.join(problems))


def cached_rbd(connection_info) -> cas_volume.RBDVolume | None:
    """The cacheable RBD volume described by *connection_info*, if any."""
    if connection_info.get('driver_volume_type') != 'rbd':
        return None
    data = connection_info.get('data')
    if not cas_volume.is_cacheable(data):
        # any name Ceph allows goes to nova's own driver, unvalidated
        return None
    return cas_volume.from_connection_properties(data)


class CachedRBDLibvirtDriver(libvirt_driver.LibvirtDriver):
    """nova's libvirt driver with Open CAS caching of cacheable RBD volumes."""

    def __init__(self, virtapi, read_only=False):
        check_nova_compatibility()
        super().__init__(virtapi, read_only)
        self._cached_rbd_driver = None

    def init_host(self, host):
        """nova's start-up, then resolve what a stopped process left.

        A drain or undrain interrupted by a crash goes back to caching by
        the safe order (:func:`os_brick_cas.lifecycle.Lifecycle.resolve`)
        before any volume is served; drains nova still holds for an
        operation (a live migration whose pre-check drained) stay in the
        journal until the periodic release finds the operation ended.
        """
        super().init_host(host)
        if not CONF[opts.GROUP].enabled:
            return
        self._resolve_unfinished(cas_lifecycle.deadline(
            CONF[opts.GROUP].live_migration_drain_timeout))

    def _resolve_unfinished(self, limit, lock_wait=None) -> None:
        """Resolve every transition a stopped process left (journal).

        At start-up and from the periodic task: an unfinished drain or
        undrain goes back to caching by the safe order, a marker clear
        Cinder did not take is retried. A volume whose lock is held is
        left to its holder (alive).
        """
        try:
            unresolved = self._volumes().resolve_unfinished(limit,
                                                            lock_wait)
        except cas_exception.CasError as exc:
            unresolved = {'(all)': str(exc)}
        for volume_id, why in unresolved.items():
            LOG.error('Volume %(vol)s: an unfinished transition is not '
                      'resolved yet (%(why)s); it stays on the safe side '
                      'and is retried by the periodic task and its next '
                      'attach or detach', {'vol': volume_id, 'why': why})

    def _cached_rbd_volume_driver(self):
        if self._cached_rbd_driver is None:
            self._cached_rbd_driver = (
                cached_volume.LibvirtCachedRBDVolumeDriver(self._host))
        return self._cached_rbd_driver

    def _volumes(self) -> volume_lifecycle.CachedVolumeLifecycle:
        """The life-cycle operations on this host's cached volumes."""
        return self._cached_rbd_volume_driver().lifecycle

    def _get_volume_driver(self, connection_info):
        if CONF[opts.GROUP].enabled and cached_rbd(connection_info):
            return self._cached_rbd_volume_driver()
        return super()._get_volume_driver(connection_info)

    def check_can_live_migrate_source(self, context, instance,
                                      dest_check_data,
                                      block_device_info=None):
        """Nova's checks, then drain the server's write-back volumes.

        Drained, Ceph has every write the guest got acknowledged and no
        write can get dirty until the switchover; the fence marker says
        so, and the destination takes it over when it attaches. If this
        host cannot drain (an Open CAS release without the IO-class
        behaviour drain needs) or the drain fails or times out, the
        migration is refused here, before it starts, and every volume
        caches its writes as before.
        """
        result = super().check_can_live_migrate_source(
            context, instance, dest_check_data, block_device_info)
        if CONF[opts.GROUP].enabled:
            self._drain_for_live_migration(instance, block_device_info)
        return result

    def _dirty_capable_cached(self, block_device_info
                              ) -> list[tuple[cas_volume.RBDVolume, dict]]:
        """(volume, connection_info) of each cached wb/wo volume here."""
        found = []
        for bdm in virt_driver.block_device_info_get_mapping(
                block_device_info):
            info = bdm.get('connection_info') or {}
            volume = cached_rbd(info)
            if (volume and volume.mode.holds_dirty_data and
                    cached_volume.LibvirtCachedRBDVolumeDriver.cached_path(
                        info)):
                found.append((volume, info))
        return found

    def _drain_for_live_migration(self, instance, block_device_info) -> None:
        lifecycle = self._volumes()
        volumes = self._dirty_capable_cached(block_device_info)
        for volume, info in volumes:
            blocker = lifecycle.drain_blocker(info)
            if blocker:
                raise exception.MigrationPreCheckError(reason=(
                    'volume %s is cached on this host in Open CAS mode %s '
                    'and this host cannot drain it: %s. Cold-migrate the '
                    'server (the detach flushes the cache), or upgrade '
                    'Open CAS.' % (volume.volume_id, volume.mode.value,
                                   blocker)))
        # one bound for every volume of the server, lock waits included
        limit = cas_lifecycle.deadline(
            CONF[opts.GROUP].live_migration_drain_timeout)
        drained = []
        for volume, info in volumes:
            try:
                LOG.info('Draining volume %s before its live migration',
                         volume.volume_id, instance=instance)
                drained.append(info)
                lifecycle.drain(info, limit=limit,
                                holder=cas_lifecycle.LIVE_MIGRATION,
                                instance_uuid=instance.uuid)
            except Exception as exc:
                LOG.error('Draining volume %(vol)s failed (%(err)s): the '
                          'live migration is refused before it starts',
                          {'vol': volume.volume_id, 'err': exc},
                          instance=instance)
                self._undrain_all(drained, instance, retake=False,
                                  holder=cas_lifecycle.LIVE_MIGRATION)
                raise exception.MigrationPreCheckError(reason=(
                    'volume %s (Open CAS mode %s) could not be drained '
                    'before the live migration: %s. Nothing was lost: its '
                    'data stays in the cache and it caches writes as '
                    'before. Retry later, or drain it ahead with '
                    '"os-brick-cas drain --volume %s" on this host.' % (
                        volume.volume_id, volume.mode.value, exc,
                        volume.volume_id)))

    def _undrain_all(self, infos: list[dict], instance, retake: bool,
                     holder: str) -> None:
        """Undrain what nova drained for *holder*; operators' drains stay."""
        lifecycle = self._volumes()
        limit = cas_lifecycle.deadline()
        for info in infos:
            try:
                lifecycle.undrain(info, retake=retake, holder=holder,
                                  limit=limit)
            except Exception:
                LOG.exception('Volume %s stays drained (its writes go '
                              'straight to Ceph); undrain it with '
                              '"os-brick-cas undrain --volume %s"',
                              info['data'].get('volume_id'),
                              info['data'].get('volume_id'),
                              instance=instance)

    @staticmethod
    def _held_by_nova(info: dict, holder: str) -> bool:
        volume = cas_volume.from_connection_properties(info['data'])
        record = cas_lifecycle.read_record(volume.spec)
        return bool(record and record.holder == holder)

    def rollback_live_migration_at_source(self, context, instance,
                                          migrate_data):
        """The guest stays here: its drained volumes cache writes again.

        The destination never ran the guest (the migration failed before
        its switchover), so this host takes the fence markers back first.
        """
        super().rollback_live_migration_at_source(context, instance,
                                                  migrate_data)
        if not CONF[opts.GROUP].enabled:
            return
        if not self._guest_runs_here(instance):
            # e.g. a post-copy migration that failed after the switchover:
            # the destination may have cached writes, so its marker stays
            # and these volumes stay drained (safe; nothing to flush here)
            LOG.error('Live migration rolled back, but the guest is not '
                      'running on this host: its drained write-back volumes '
                      'stay drained and their fence markers are not taken '
                      'back. Check where the guest runs, then use '
                      '"os-brick-cas owners" and "os-brick-cas undrain".',
                      instance=instance)
            return
        block_device_info = self._source_block_device_info(context,
                                                           instance)
        infos = [info for _volume, info in
                 self._dirty_capable_cached(block_device_info)]
        ours = [info for info in infos if self._held_by_nova(
            info, cas_lifecycle.LIVE_MIGRATION)]
        for info in infos:
            if info not in ours and self._volumes().is_drained(info):
                # drained ahead by an operator: stays drained, but the
                # marker names this host again
                try:
                    self._volumes().reclaim_drained(info)
                except Exception:
                    LOG.exception('Could not name this host in the fence '
                                  'marker of drained volume %s again; '
                                  '"os-brick-cas undrain" sets it',
                                  info['data'].get('volume_id'),
                                  instance=instance)
        self._undrain_all(ours, instance, retake=True,
                          holder=cas_lifecycle.LIVE_MIGRATION)

    def _guest_runs_here(self, instance) -> bool:
        """Whether libvirt runs the guest on this host (not paused)."""
        try:
            guest = self._host.get_guest(instance)
            return (guest.get_power_state(self._host) ==
                    power_state.RUNNING)
        except exception.InstanceNotFound:
            return False

    def _release_stranded_drains(self) -> None:
        """Undrain volumes whose nova operation ended without undraining.

        Nova calls no source hook when the destination's pre-migration
        step fails, nor when the conductor gives up after the pre-check,
        and nova-compute may have restarted since; a swap or snapshot can
        abort after its drain too. The guest then stays here with drained
        volumes (safe, only slower). The drains nova holds are in the
        host's life-cycle journal (not in memory); run periodically: a
        server that is back on this host with no task in progress gets
        write-back again. Operators' drains are not touched.
        """
        context = nova_context.get_admin_context()
        # what a stopped process left first (its lock is free): an
        # operator's drain killed mid-flush, a marker clear not taken
        self._resolve_unfinished(cas_lifecycle.deadline(), lock_wait=0)
        machine = self._volumes().machine
        for record in machine.held():
            subject = cas_lifecycle.Volume(record.spec, record.volume_id)
            try:
                instance = objects.Instance.get_by_uuid(
                    context, record.instance)
            except (exception.InstanceNotFound, TypeError, ValueError):
                instance = None
            if instance is None or instance.host != CONF.host:
                # gone, or moved: its core here goes with its detach
                LOG.info('Volume %s: the server nova drained it for is not '
                         'on this host; its drain stays until the detach',
                         record.volume_id)
                self._keep_drained(machine, subject, record)
                continue
            if (instance.task_state is None and
                    self._guest_runs_here(instance)):
                LOG.info('The %s of this server ended without undraining; '
                         'volume %s caches writes again', record.holder,
                         record.volume_id, instance=instance)
                try:
                    # no operation in progress and the guest runs here: no
                    # other host ran it, whatever the marker names now
                    machine.undrain(
                        subject, volume_lifecycle.cinder_view(),
                        cas_lifecycle.deadline(),
                        retake=(record.holder ==
                                cas_lifecycle.LIVE_MIGRATION),
                        holder=record.holder)
                except cas_exception.CasError as exc:
                    LOG.error('%s', exc, instance=instance)
            else:
                self._keep_drained(machine, subject, record)

    def _keep_drained(self, machine, subject,
                      record: 'cas_lifecycle.Record') -> None:
        """A drain that stays is verified from a fresh listing first."""
        try:
            machine.keep_drained(
                subject, volume_lifecycle.cinder_view(),
                cas_lifecycle.deadline(), record.holder,
                record.instance)
        except cas_exception.CasError as exc:
            LOG.error('Volume %(vol)s is held drained for a %(holder)s but '
                      'is not drained on this host, and draining it again '
                      'failed: %(err)s. Run "os-brick-cas drain --volume '
                      '%(vol)s" on this host.', {
                          'vol': subject.label, 'holder': record.holder,
                          'err': exc})

    @staticmethod
    def _source_block_device_info(context, instance) -> dict:
        """The server's volume mappings as block_device_info has them."""
        mappings = []
        for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
                context, instance.uuid):
            if bdm.is_volume and bdm.connection_info:
                mappings.append({'connection_info':
                                 jsonutils.loads(bdm.connection_info)})
        return {'block_device_mapping': mappings}

    def quiesce(self, context, instance, image_meta):
        """Freeze the guest, then drain its write-back volumes.

        nova quiesces a running volume-backed server before it snapshots
        its volumes; drained (flushed, and no write can get dirty), Ceph
        holds everything the frozen guest wrote, and the fence marker
        tells Cinder to allow the snapshot. If a drain fails or times
        out, the guest is thawed, the volumes cache writes again with
        their dirty data kept, and the snapshot fails before any volume
        is snapshotted.
        """
        volumes = self._snapshot_volumes(context, instance)
        self._refuse_undrainable(instance, volumes)
        super().quiesce(context, instance, image_meta)
        self._drain_for_snapshot(context, instance, image_meta, volumes)

    def _snapshot_volumes(self, context, instance
                          ) -> list[tuple[cas_volume.RBDVolume, dict]]:
        """The server's cached wb/wo volumes (none if caching is off)."""
        if not CONF[opts.GROUP].enabled:
            return []
        return self._dirty_capable_cached(
            self._source_block_device_info(context, instance))

    def _drain_for_snapshot(self, context, instance, image_meta,
                            volumes) -> None:
        """Drain *volumes* of the frozen guest, or thaw it and raise."""
        drained: list[dict] = []
        # one bound for all volumes of the server, lock waits included
        limit = cas_lifecycle.deadline(
            CONF[opts.GROUP].snapshot_drain_timeout)
        for volume, info in volumes:
            LOG.info('Draining volume %s for the snapshot of its server',
                     volume.volume_id, instance=instance)
            drained.append(info)        # a half-done drain is undone too
            try:
                self._volumes().drain(
                    info, limit=limit, holder=cas_lifecycle.SNAPSHOT,
                    instance_uuid=instance.uuid)
            except Exception as exc:
                LOG.error('Draining volume %(vol)s for a snapshot failed '
                          '(%(err)s): the guest is thawed, the snapshot '
                          'fails', {'vol': volume.volume_id, 'err': exc},
                          instance=instance)
                try:
                    self._thaw_then_undrain(context, instance, image_meta,
                                            drained)
                except Exception:
                    # nova unquiesces again after SnapshotDrainFailed
                    LOG.exception('Thawing the guest failed',
                                  instance=instance)
                raise SnapshotDrainFailed(
                    'volume %s (Open CAS mode %s) could not be drained for '
                    'the snapshot: %s. Nothing was lost: its data stays in '
                    'the cache and it caches writes as before. Retry the '
                    'snapshot later, or drain the volume ahead with '
                    '"os-brick-cas drain --volume %s" on host %s.' % (
                        volume.volume_id, volume.mode.value, exc,
                        volume.volume_id, CONF.host)) from exc

    def _refuse_undrainable(self, instance, volumes) -> None:
        """Quiescing is "not supported" if a volume cannot be drained.

        nova then snapshots unquiesced and Cinder refuses the write-back
        volume with 400, as for a guest without a qemu guest agent.
        """
        for volume, info in volumes:
            blocker = self._volumes().drain_blocker(info)
            if blocker:
                LOG.warning('Not quiescing for a snapshot: volume %(vol)s '
                            'cannot be drained on this host (%(why)s)',
                            {'vol': volume.volume_id, 'why': blocker},
                            instance=instance)
                raise exception.InstanceQuiesceNotSupported(
                    instance_id=instance.uuid)

    def unquiesce(self, context, instance, image_meta):
        """Thaw the guest, then let its drained volumes cache writes again.

        nova calls this once the volume snapshots completed.
        """
        infos = [info for _volume, info in
                 self._snapshot_volumes(context, instance)]
        self._thaw_then_undrain(context, instance, image_meta, infos)

    def _thaw_then_undrain(self, context, instance, image_meta,
                           infos: list[dict]) -> None:
        # Thaw first: a frozen guest is what users notice, while a
        # drained volume is only slower (its writes go straight to Ceph,
        # so no order loses data), and a failed undrain - it calls Cinder
        # and casadm - must never leave the guest frozen. The snapshots
        # completed before nova unquiesces, so writes after the thaw are
        # not in them either way.
        try:
            super().unquiesce(context, instance, image_meta)
        finally:
            # the marker names this host: never take another host's
            self._undrain_all(infos, instance, retake=False,
                              holder=cas_lifecycle.SNAPSHOT)

    def swap_volume(self, context, old_connection_info, new_connection_info,
                    instance, mountpoint, resize_to):
        """Drain a cached old volume before the guest moves off it.

        Drain = no dirty data and none can appear (os_brick_cas.drain),
        so writes during the block copy go straight to Ceph. A failed or
        timed-out flush aborts the swap before anything
        changed (nova deletes the new attachment; the guest stays on the
        old volume). After the pivot, a failed detach of the old volume no
        longer fails the swap: the guest runs on the new volume by then,
        and the old volume's remaining dirty data stays in the cache.
        """
        old = (cached_rbd(old_connection_info)
               if CONF[opts.GROUP].enabled else None)
        if old is None:
            return super().swap_volume(
                context, old_connection_info, new_connection_info, instance,
                mountpoint, resize_to)
        volume_driver = self._cached_rbd_volume_driver()
        try:
            if old.mode.holds_dirty_data and volume_driver.cached_path(
                    old_connection_info):
                # drained: no write during the block copy can get dirty,
                # so the detach after the pivot has nothing left to flush
                LOG.info('Draining volume %s before swapping it out',
                         old.volume_id, instance=instance)
                volume_driver.lifecycle.drain(old_connection_info,
                                              holder=cas_lifecycle.SWAP,
                                              instance_uuid=instance.uuid)
            with volume_driver.lifecycle.keeping_data_on_failed_detach(
                    old.volume_id):
                return super().swap_volume(
                    context, old_connection_info, new_connection_info,
                    instance, mountpoint, resize_to)
        except Exception:
            with excutils.save_and_reraise_exception():
                # aborted: the guest stays on the old volume
                self._undrain_all([old_connection_info], instance,
                                  retake=False, holder=cas_lifecycle.SWAP)

    def check_can_live_migrate_destination(self, context, instance,
                                           src_compute_info, dst_compute_info,
                                           block_migration=False,
                                           disk_over_commit=False):
        if CONF[opts.GROUP].enabled:
            self._refuse_cache_disagreement(context, instance)
        return super().check_can_live_migrate_destination(
            context, instance, src_compute_info, dst_compute_info,
            block_migration, disk_over_commit)

    def _refuse_cache_disagreement(self, context, instance) -> None:
        """Refuse unless this host caches each volume as the source does.

        Cached means a block disk, uncached a librbd network disk; nova
        rewrites a migrating volume's source, never its disk type, so
        a mismatch gives destination XML libvirt rejects.
        """
        bdms = objects.BlockDeviceMappingList.get_by_instance_uuid(
            context, instance.uuid)
        for bdm in bdms:
            if not bdm.is_volume or not bdm.connection_info:
                continue
            info = jsonutils.loads(bdm.connection_info)
            volume = cached_rbd(info)
            if volume is None:
                continue
            on_source = (cached_volume.LibvirtCachedRBDVolumeDriver
                         .cached_path(info) is not None)
            here, why, mode = self._would_cache(volume)
            if on_source != here:
                raise exception.MigrationPreCheckError(reason=(
                    'volume %s is %s on the source host but would be %s on '
                    'this host (%s); both must agree, because nova keeps '
                    'the disk type when it moves a volume. Migrate to a '
                    'host that %s, or detach the volume first.' % (
                        volume.volume_id,
                        'cached (Open CAS block disk)' if on_source
                        else 'attached uncached (librbd)',
                        'cached' if here else 'attached uncached',
                        why, 'caches mode %s' % volume.mode.value
                        if on_source else 'does not cache it')))
            if (on_source and volume.mode.holds_dirty_data and
                    mode is not volume.mode):
                # the source drains and hands its marker over to a host
                # that caches the volume as its type asks, nothing else
                raise exception.MigrationPreCheckError(reason=(
                    'volume %s is cached in Open CAS mode %s on the source '
                    'host but would be cached in mode %s on this host (%s). '
                    'Migrate to a host that offers mode %s (trait '
                    'CUSTOM_OPENCAS_%s).' % (
                        volume.volume_id, volume.mode.value,
                        mode.value if mode else 'none', why,
                        volume.mode.value, volume.mode.value.upper())))

    @staticmethod
    def _would_cache(volume: cas_volume.RBDVolume
                     ) -> tuple[bool, str, Optional[cas_modes.CacheMode]]:
        """Whether an attach here would cache *volume*, why, in which mode."""
        volume_cache = cas_cache.VolumeCache()
        try:
            placement = volume_cache.policy.place(
                volume.mode, volume_cache.list_caches())
        except cas_exception.CasError as exc:
            return False, str(exc), None
        if not placement.cached:
            return False, 'no usable instance for mode %s' % (
                volume.mode.value), None
        return True, 'instance %d serves mode %s' % (
            placement.cache_id, placement.mode.value), placement.mode

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        """Report CUSTOM_OPENCAS_<MODE> traits (and release stale drains).

        Nova calls this from its periodic resource update, the one
        periodic hook a virt driver has.
        """
        super().update_provider_tree(provider_tree, nodename, allocations)
        if not CONF[opts.GROUP].enabled:
            return
        self._release_stranded_drains()
        offered = set(self._usable_cache_traits())
        stale = {trait for trait in provider_tree.data(nodename).traits
                 if trait.startswith(TRAIT_PREFIX)} - offered
        if stale:
            provider_tree.remove_traits(nodename, *stale)
        if offered:
            provider_tree.add_traits(nodename, *offered)

    def _usable_cache_traits(self) -> list[str]:
        """CUSTOM_OPENCAS_<MODE> for each mode this host can serve now."""
        volume_cache = cas_cache.VolumeCache()
        try:
            caches = volume_cache.list_caches()
            policy = volume_cache.policy
        except cas_exception.CasError as exc:
            LOG.warning('Open CAS unusable, reporting no cache traits: %s',
                        exc)
            return []
        broken = policy.problems(caches)
        for mode, problem in broken.items():
            LOG.warning('Cache mode %(mode)s not offered: %(why)s',
                        {'mode': mode.value, 'why': problem})
        return sorted(TRAIT_PREFIX + mode.value.upper()
                      for mode in policy.offered_modes if mode not in broken)
