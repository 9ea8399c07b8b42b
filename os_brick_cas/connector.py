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

"""Connector for Cinder RBD volumes cached on the host with Open CAS.

Attach: krbd-map the image, find its /dev/rbdN by pool, namespace and
image, check in krbd's sysfs that it is that image, name it with the
by-id link that identifies exactly that image (casadm takes nothing but
by-id paths), add it as a core to the instance serving the volume's cache
mode, return ``/dev/casX-Y``. Detach: flush when the core holds dirty data,
remove the core, unmap exactly that image's device.
Every failure rolls back what this call did; dirty data is never dropped.
Volumes that are not cacheable behave exactly as with os-brick's
RBDConnector (no casadm involved).
"""

import os
import signal
from typing import Any, Optional

from os_brick import exception as brick_exception
from os_brick.initiator.connectors import rbd
from os_brick.privileged import rbd as rbd_privsep
from os_brick import utils as brick_utils
from oslo_concurrency import processutils
from oslo_log import log as logging
from oslo_utils import excutils

from os_brick_cas import cache as cache_mod
from os_brick_cas import devlinks
from os_brick_cas import drain as drain_mod
from os_brick_cas import events
from os_brick_cas import exception
from os_brick_cas import identity
from os_brick_cas import io_class_table
from os_brick_cas import lifecycle
from os_brick_cas import locks
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import opencas_conf
from os_brick_cas import opts
from os_brick_cas import ownership
from os_brick_cas import rbd_names
from os_brick_cas import volume as volume_mod

LOG = logging.getLogger(__name__)

#: krbd's answer to unmapping a device that is open (errno EBUSY)
EBUSY = 16
#: casadm is not usable at all on this host
NO_OPEN_CAS = (exception.CasadmNotFound, exception.CasModuleNotLoaded)
#: seconds an attach waits for udev to finish with the devices it made


def _names_image(core_device: str, spec: rbd_names.ImageSpec) -> bool:
    """Whether by-id path *core_device* is an identifying link of *spec*."""
    named = rbd_names.parse_link_name(os.path.basename(core_device))
    return named is not None and named.same_image(spec)


class CachedRBDConnector(rbd.RBDConnector):
    """RBD connector that puts the krbd device behind Open CAS."""

    def __init__(self, root_helper: Optional[str] = None, *args,
                 volume_cache: Optional[cache_mod.VolumeCache] = None,
                 **kwargs):
        # cached volumes are always mapped locally (see _map); any other
        # volume follows os-brick's own do_local_attach rules
        super().__init__(root_helper, *args, **kwargs)
        self.volume_cache = volume_cache or cache_mod.VolumeCache()

    # -- krbd, by exact identity --------------------------------------

    def _map(self, volume: volume_mod.RBDVolume, props: dict[str, Any]
             ) -> tuple[str, bool]:
        """krbd-map *volume*; return (/dev/rbdN, whether it was mapped)."""
        device = identity.find_mapping(volume.spec)
        if device is not None:
            return device, True
        conf = self.create_non_openstack_config(props)
        try:
            args = [volume.image, '--pool', volume.pool]
            if volume.namespace:
                args += ['--namespace', volume.namespace]
            self._rbd(volume, 'map', args, props, conf)
        except exception.RbdTimedOut:
            self._unmap_late_mapping(volume, props)
            raise
        finally:
            # the temporary conf holds a keyring: gone as soon as mapped
            if conf:
                rbd_privsep.delete_if_exists(conf)
        device = identity.find_mapping(volume.spec)
        if device is None:
            raise brick_exception.VolumeDeviceNotFound(device=volume.label)
        return device, False

    def _unmap_late_mapping(self, volume: volume_mod.RBDVolume,
                            props: dict[str, Any]) -> None:
        """After a killed map: unmap the device if the kernel made it."""
        try:
            if self._unmap(volume, props):
                LOG.warning('The timed-out map of volume %s completed '
                            'after all; unmapped it again.', volume.label)
        except Exception:
            LOG.exception('Could not unmap volume %s after its map timed '
                          'out; a later detach unmaps it.', volume.label)

    def _unmap(self, volume: volume_mod.RBDVolume, props: dict[str, Any],
               device: Optional[str] = None) -> bool:
        """Unmap exactly *volume*'s device (checked in sysfs first)."""
        if device is None:
            device = identity.find_mapping(volume.spec)
        if device is None:
            return False
        identity.verify_device(device, volume.spec,
                               'unmap volume %s' % volume.label)
        # never '-o force': krbd would drop a device a core still holds,
        # leaving that core Active on a dead device with its dirty data
        try:
            self._rbd(volume, 'unmap', [device], props)
        except processutils.ProcessExecutionError as exc:
            held = None
            if exc.exit_code == EBUSY or 'Device or resource busy' in (
                    exc.stderr or ''):
                held = self._held(volume, device, exc)
            if held is None:
                raise
            raise held from exc
        return True

    def _rbd(self, volume: volume_mod.RBDVolume, operation: str,
             args: list[str], props: dict[str, Any],
             conf: Optional[str] = None) -> None:
        """Run ``rbd <operation>`` as root, killed after rbd_timeout."""
        timeout = self.volume_cache.conf[opts.GROUP].rbd_timeout
        try:
            with events.timed('rbd_' + operation):
                self._execute('rbd', operation, *args,
                              *self._get_rbd_args(props, conf),
                              root_helper=self._root_helper,
                              run_as_root=True, timeout=timeout,
                              signal=int(signal.SIGKILL))
        except brick_exception.ExecutionTimeout:
            raise exception.RbdTimedOut(
                operation=operation, volume=volume.label, timeout=timeout,
                state='the volume may still be mapped' if operation ==
                'unmap' else 'a late mapping is unmapped again')

    def _settle_udev(self, volume: volume_mod.RBDVolume, after: str
                     ) -> None:
        """Wait (bounded) until udev has handled the devices just made.

        A new /dev/rbdN or /dev/casX-Y is probed by udev's workers (blkid
        reads, Open CAS's loader running casadm) for seconds after the
        kernel made it; the guest's first writes must not race them (the
        real-kernel tier lost a wb write's blocks that way). A udev that
        does not settle in time only costs a warning: the attach goes on
        as it would have without the wait. It needs no root: it runs as
        the service's own user, not through privsep.
        """
        timeout = self.volume_cache.conf[opts.GROUP].udev_settle_timeout
        if not timeout:
            return
        try:
            with events.timed('udev_settle'):
                self._execute('udevadm', 'settle', '--timeout=%d' % timeout,
                              run_as_root=False, timeout=timeout + 10,
                              signal=int(signal.SIGKILL))
        except (processutils.ProcessExecutionError,
                brick_exception.ExecutionTimeout) as exc:
            LOG.warning('udev did not settle within %(timeout)d s after '
                        '%(after)s of volume %(vol)s (%(err)s); going on.',
                        {'timeout': timeout, 'after': after,
                         'vol': volume.label, 'err': exc})

    def _held(self, volume: volume_mod.RBDVolume, device: str,
              cause: processutils.ProcessExecutionError
              ) -> Optional[exception.DeviceHeldByCore]:
        """The refusal for an EBUSY unmap naming the core that holds it.

        None when no Open CAS core holds it (another opener: the caller
        re-raises krbd's error as os-brick would).
        """
        real = os.path.realpath(device)
        try:
            caches = self.volume_cache.list_caches()
        except exception.CasError:
            return None
        holders = ['Open CAS %s (%s)' % (core.label, core.device)
                   for cache in caches for core in cache.cores
                   if core.active and os.path.realpath(core.device) == real]
        if not holders:
            return None
        holder = holders[0]
        detail = ' '.join((cause.stderr or '').split()) or str(cause)
        LOG.error('krbd refused to unmap %(dev)s of volume %(vol)s: held by '
                  '%(holder)s', {'dev': device, 'vol': volume.label,
                                 'holder': holder})
        return exception.DeviceHeldByCore(device=device, volume=volume.label,
                                          holder=holder, detail=detail)

    # -- attach --------------------------------------------------------

    @brick_utils.trace
    @brick_utils.connect_volume_prepare_result
    def connect_volume(self, connection_properties: dict[str, Any]
                       ) -> dict[str, Any]:
        """Map, cache and return ``{'type': 'block', 'path': ...}``."""
        if not volume_mod.is_cacheable(connection_properties):
            return super().connect_volume(connection_properties)
        volume = volume_mod.from_connection_properties(connection_properties)
        with locks.volume_lock(volume.spec):
            try:
                caches = self.volume_cache.list_caches()
            except NO_OPEN_CAS as exc:
                self._refuse_if_cache_stopped(volume, 'attach', None, exc)
                raise
            self._refuse_if_cache_stopped(volume, 'attach', caches)
            self._refuse_stale_before_map(volume, caches)
            lifecycle.require(self.volume_cache.casadm, volume.spec,
                              'attach', volume.label, caches=caches)
            return self._connect(volume, connection_properties, caches)

    def _connect(self, volume: volume_mod.RBDVolume,
                 props: dict[str, Any],
                 caches: list[casadm_output.CacheInstance]) -> dict[str, Any]:
        device, was_mapped = self._map(volume, props)
        link: Optional[str] = None
        link_created = False
        try:
            if not was_mapped:
                # before the core exists and opencas.conf lists it: the
                # krbd device's own udev run ends first
                self._settle_udev(volume, 'the map')
            mapped = identity.verify_device(
                device, volume.spec, 'attach volume %s' % volume.label)
            spec = mapped.spec
            link = devlinks.by_id_link(spec)
            in_use = self.volume_cache.casadm.find_core(caches, link)
            link_created = devlinks.ensure_link(
                link, device, spec,
                in_use=in_use is not None and in_use.active)
            cached = self.volume_cache.attach(
                link, volume.mode, volume.label, caches=caches, spec=spec,
                epoch=volume.epoch, owner_epoch=volume.owner_epoch,
                share=volume.share)
        except Exception:
            with excutils.save_and_reraise_exception():
                LOG.error('Attaching volume %s failed; undoing what this '
                          'attach did.', volume.label)
                self._rollback(volume, props, device, was_mapped,
                               link if link_created else None)
        if cached is None:
            return {'type': 'block', 'path': device}
        if cached.fresh or not was_mapped:
            # the path goes to the guest: udev's probe of it is over first
            # (an attach that found both the mapping and the core active
            # made no device, so there is nothing to wait for)
            self._settle_udev(volume, 'adding the core')
        result = {'type': 'block', 'path': cached.path,
                  'cache_mode': cached.mode.value}
        if volume.share is not None:
            # the share the core has now: None when it got no class
            result['cache_share'] = cached.share
        return result

    def _rollback(self, volume: volume_mod.RBDVolume, props: dict[str, Any],
                  device: str, was_mapped: bool,
                  created_link: Optional[str]) -> None:
        """Undo the steps of a failed attach; log, never raise."""
        if created_link:
            try:
                devlinks.remove_link(created_link, device)
            except Exception:
                LOG.exception('Rollback: could not remove %s', created_link)
        if not was_mapped:
            try:
                self._unmap(volume, props)
            except Exception:
                LOG.exception('Rollback: could not unmap volume %s',
                              volume.label)

    # -- detach --------------------------------------------------------

    def _core_of(self, volume: volume_mod.RBDVolume,
                 caches: list[casadm_output.CacheInstance]
                 ) -> Optional[casadm_output.Core]:
        """The core holding *volume*: by its identifying link, else 1.x.

        A 1.x ``rbd-<pool>-<image>`` core counts only while active and
        only if krbd says its device is this image; an inactive one cannot
        be told apart from another image's and is refused.
        """
        found = [core for cache in caches for core in cache.cores
                 if _names_image(core.device, volume.spec)]
        if len(found) > 1:
            raise exception.AmbiguousCore(
                action='detach', volume=volume.label,
                reason='cores %s all name this pool/namespace/image in '
                       'different clusters and the connection data gives '
                       'no cluster fsid' % ', '.join(
                           '%d/%d' % (c.cache_id, c.core_id) for c in found))
        if found:
            return found[0]
        legacy = devlinks.legacy_link(volume.spec)
        core = (self.volume_cache.casadm.find_core(caches, legacy)
                if legacy else None)
        if core is None:
            return None
        if not core.active:
            raise exception.AmbiguousCore(
                action='detach', volume=volume.label,
                reason='inactive %s was added by '
                       'os-brick-cas 1.x as %s, a name another image can '
                       'share, so its data cannot be matched to this '
                       'volume safely. Re-activate it by hand (casadm '
                       '--script --add-core --try-add) once you know which '
                       "image's device belongs under that name"
                       % (core.label, legacy))
        identity.verify_link(core.device, 'detach volume %s' % volume.label,
                             volume.spec)
        return core

    @brick_utils.trace
    @brick_utils.connect_volume_undo_prepare_result(unlink_after=True)
    def disconnect_volume(self, connection_properties: dict[str, Any],
                          device_info: Optional[dict[str, Any]],
                          force: bool = False,
                          ignore_errors: bool = False) -> None:
        """Flush (when needed), remove the core and unmap.

        ``force`` and ``ignore_errors`` never apply to dirty data: a failed
        or timed-out flush raises and leaves core and mapping in place.
        """
        if not volume_mod.is_cacheable(connection_properties):
            return super().disconnect_volume(
                connection_properties, device_info, force=force,
                ignore_errors=ignore_errors)
        volume = volume_mod.from_connection_properties(connection_properties)
        with locks.volume_lock(volume.spec):
            self._disconnect(volume, connection_properties)

    def _disconnect(self, volume: volume_mod.RBDVolume,
                    props: dict[str, Any]) -> None:
        try:
            caches = self.volume_cache.list_caches()
        except NO_OPEN_CAS as exc:
            self._refuse_if_cache_stopped(volume, 'detach', None, exc)
            LOG.info('Open CAS is not usable on this host (%s) and '
                     'opencas.conf lists no core of volume %s: it was not '
                     'cached here.', exc, volume.label)
            caches = None
        core = self._core_of(volume, caches) if caches is not None else None
        if caches is not None:
            lifecycle.require(self.volume_cache.casadm, volume.spec,
                              'detach', volume.label, caches=caches)
        removed = False
        if core is not None:
            self._refuse_unless_owner(volume, core)
            try:
                removed = self.volume_cache.detach_core(
                    core, volume.label, volume.spec, caches)
            except exception.InactiveCoreDeviceMissing as stranded:
                # e.g. after a host reboot: map the volume so the core can
                # be re-activated and its dirty data flushed to Ceph
                LOG.info('Volume %s has dirty data in an inactive Open CAS '
                         'core; mapping it to flush that data before the '
                         'detach.', volume.label)
                try:
                    self._map_for_flush(volume, props, core)
                except Exception as exc:
                    LOG.error('Could not map volume %(vol)s to flush its '
                              'inactive core: %(err)s', {
                                  'vol': volume.label, 'err': exc})
                    raise stranded from exc
                removed = self.volume_cache.detach_core(
                    self._current(core), volume.label, volume.spec)
        else:
            if caches is not None:
                self._refuse_if_cache_stopped(volume, 'detach', caches)
            self._forget_stale_rows(volume, caches)
        device = identity.find_mapping(volume.spec)
        links = {core.device} if core is not None else set()
        mapped = identity.mapped(device) if device else None
        if mapped is not None and mapped.spec.fsid is not None:
            links.add(devlinks.by_id_link(mapped.spec))
        unmapped = self._unmap(volume, props, device)
        for link in sorted(links):
            devlinks.remove_link(link, device)
        # no core, no drain: a life-cycle record of it has nothing to hold
        lifecycle.advance(volume.spec, lifecycle.ABSENT, 'detach',
                          volume.label)
        if not (removed or unmapped):
            LOG.info('Volume %s was already detached from this host.',
                     volume.label)

    def _refuse_stale_before_map(
            self, volume: volume_mod.RBDVolume,
            caches: list[casadm_output.CacheInstance]) -> None:
        """Refuse before mapping if a dirty core here is not ours to use.

        Mapping the image makes its by-id link appear, and Open CAS's udev
        loader re-activates a listed core at once - which starts cleaning
        its (stale) dirty data into the image. So this is checked before
        ``rbd map``; the same rule as the claim in VolumeCache.attach.
        """
        if volume.epoch is None:
            return
        for core in (core for cache in caches for core in cache.cores
                     if _names_image(core.device, volume.spec)):
            self._refuse_unless_owner(volume, core, 'attach',
                                      also=volume.epoch)

    def _refuse_unless_owner(self, volume: volume_mod.RBDVolume,
                             core: casadm_output.Core, action: str = 'detach',
                             also: Optional[str] = None) -> None:
        """Refuse to use dirty data of an attachment that is not the owner.

        Only when the caller says who owns the volume's data
        (``cas_owner_epoch``); a core whose record names the owner (or
        attachment *also*) passes, and a clean core is always safe.
        """
        if volume.owner_epoch is ownership.UNKNOWN:
            return
        try:
            ownership.refuse_unless_owner(
                action, volume.label, core.cache_id, core.core_id,
                ownership.read(core.device), volume.owner_epoch,
                lambda: self.volume_cache.casadm.dirty_blocks(core), also)
        except exception.NotDataOwner as error:
            LOG.error('%s', error)
            raise

    def _current(self, core: casadm_output.Core) -> casadm_output.Core:
        """*core* as casadm lists it now (the udev loader may have acted)."""
        now = self.volume_cache.casadm.find_core(
            self.volume_cache.list_caches(), core.device)
        return now or core

    def _listed_rows(self, volume: volume_mod.RBDVolume
                     ) -> list[tuple[int, int, str]]:
        """opencas.conf [cores] rows (cache, core, device) of *volume*."""
        listed = opencas_conf.read(self.volume_cache.opencas_conf_path)
        legacy = volume.spec.legacy_link_name()
        return [(cache_id, core_id, device)
                for (cache_id, core_id), device in sorted(
                    listed.cores.items())
                if _names_image(device, volume.spec) or (
                    legacy and os.path.basename(device) == legacy)]

    def _refuse_if_cache_stopped(
            self, volume: volume_mod.RBDVolume, action: str,
            caches: Optional[list[casadm_output.CacheInstance]],
            cause: Optional[exception.CasError] = None) -> None:
        """Refuse if opencas.conf lists *volume* in a cache not running.

        Such a cache (or all of Open CAS, when *caches* is None) may hold
        the volume's newest data: attaching it uncached or elsewhere, or
        calling it detached, would let older data win. Nothing is changed.
        """
        running = (None if caches is None
                   else {cache.cache_id for cache in caches})
        for cache_id, core_id, _device in self._listed_rows(volume):
            if running is not None and cache_id in running:
                continue
            error = exception.CachedDataMayBeNewer(
                action=action, volume=volume.label,
                conf=self.volume_cache.opencas_conf_path, core=core_id,
                cache_id=cache_id,
                state=('not running' if cause is None else
                       'not usable (%s)' % cause))
            LOG.error('%s', error)
            raise error

    def _forget_stale_rows(self, volume: volume_mod.RBDVolume,
                           caches: Optional[list[casadm_output.CacheInstance]]
                           ) -> None:
        """Drop rows of *volume* left by an interrupted detach."""
        if caches is None:
            return
        for device in {row[2] for row in self._listed_rows(volume)}:
            self.volume_cache.forget_stale_rows(device, caches)

    def _map_for_flush(self, volume: volume_mod.RBDVolume,
                       props: dict[str, Any],
                       core: casadm_output.Core) -> None:
        """krbd-map *volume* and link it where its inactive core expects."""
        device, _was_mapped = self._map(volume, props)
        spec = identity.spec_of_link(core.device, volume.spec)
        devlinks.ensure_link(core.device, device, spec, in_use=False)

    # -- flush in place ------------------------------------------------

    def _located(self, volume: volume_mod.RBDVolume
                 ) -> tuple[Optional[casadm_output.CacheInstance],
                            Optional[casadm_output.Core]]:
        """This host's core of *volume* and its instance (casadm now)."""
        caches = self.volume_cache.list_caches()
        core = self._core_of(volume, caches)
        if core is None:
            return None, None
        [cache] = [c for c in caches if c.cache_id == core.cache_id]
        return cache, core

    def _drains(self) -> drain_mod.DrainManager:
        return drain_mod.DrainManager(self.volume_cache.casadm)

    def flush_volume(self, connection_properties: dict[str, Any],
                     timeout: Optional[int] = None) -> bool:
        """Flush a cached volume's dirty data now, keeping it attached.

        Bounded by *timeout* (default ``flush_timeout``); raises
        FlushFailed/FlushTimedOut with the data still in the cache.
        Returns False when the volume has no active core here (nothing to
        flush). Drain and undrain are life-cycle transitions
        (:mod:`os_brick_cas.lifecycle`).
        """
        volume = volume_mod.from_connection_properties(connection_properties)
        return lifecycle.Lifecycle(self.volume_cache.casadm).flush_in_place(
            lifecycle.Volume(volume.spec, volume.volume_id),
            volume.owner_epoch,
            timeout or self.volume_cache.conf[opts.GROUP].flush_timeout)

    def drain_blocker(self, connection_properties: dict[str, Any]
                      ) -> Optional[str]:
        """Why this host cannot drain the volume's core; None if it can.

        None too when the volume has no core here (nothing to drain).
        """
        cache, _core = self._located(
            volume_mod.from_connection_properties(connection_properties))
        return (drain_mod.unsupported_reason(self.volume_cache.casadm, cache)
                if cache is not None else None)

    def is_drained(self, connection_properties: dict[str, Any]) -> bool:
        """Whether this host's core of the volume is drained now."""
        _cache, core = self._located(
            volume_mod.from_connection_properties(connection_properties))
        return core is not None and self._drains().is_drained(
            core.cache_id, core.core_id)

    def cache_share(self, connection_properties: dict[str, Any]
                    ) -> io_class_table.ShareStatus:
        """The volume's cache share: asked for, and what its core has.

        ``has`` is None while the core is drained, when the instance's
        IO-class budget left it without a class, or with no core here.
        """
        volume = volume_mod.from_connection_properties(connection_properties)
        _cache, core = self._located(volume)
        has = (io_class_table.Keeper(self.volume_cache.casadm).share_now(
            core.cache_id, core.core_id) if core is not None else None)
        return io_class_table.ShareStatus(volume.share, has)

    def cached_epoch(self, connection_properties: dict[str, Any]
                     ) -> Optional[str]:
        """The attachment whose data this host's core of the volume holds."""
        _cache, core = self._located(
            volume_mod.from_connection_properties(connection_properties))
        record = ownership.read(core.device) if core is not None else None
        return record.epoch if record else None

    # -- paths and size ------------------------------------------------

    def get_volume_paths(self, connection_properties: dict[str, Any]
                         ) -> list[str]:
        """The /dev/casX-Y of a cached volume; as os-brick otherwise."""
        if not volume_mod.is_cacheable(connection_properties):
            return super().get_volume_paths(connection_properties)
        volume = volume_mod.from_connection_properties(connection_properties)
        try:
            core = self._core_of(volume, self.volume_cache.list_caches())
        except NO_OPEN_CAS:
            return []
        return [core.exported] if core and core.exported else []

    def extend_volume(self, connection_properties: dict[str, Any]) -> int:
        """Refuse for a volume cached here now; as os-brick otherwise.

        An Open CAS core cannot change size while attached (the next cache
        load would fail).
        """
        if volume_mod.is_cacheable(connection_properties):
            volume = volume_mod.from_connection_properties(
                connection_properties)
            try:
                core = self._core_of(volume, self.volume_cache.list_caches())
            except NO_OPEN_CAS:
                core = None
            if core is not None:
                raise exception.CasError(
                    message='Volume %s is cached by Open CAS; a core cannot '
                            'be resized while attached (the next cache load '
                            'would fail). Detach the volume, extend it, '
                            'attach it again.' % volume.label)
        return super().extend_volume(connection_properties)
