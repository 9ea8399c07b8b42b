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

"""Putting a block device behind an Open CAS cache instance and back.

:class:`VolumeCache` is the cache step shared by the RBD connector and the
os-brick cache-engine adapter. Its rules (design.md, "Safety rules"):

* a device already cached is returned as is; an inactive core (after a host
  reboot) is re-activated in its own instance with its own core id;
* cores of write-back/write-only instances are listed in opencas.conf with
  lazy_startup=true while attached;
* detach flushes a core whose instance can hold dirty data, under a time
  bound, and removes nothing when the flush fails or runs out of time;
* a core that holds dirty data is never removed with force;
* a volume with a cache share gets its IO class at attach (and back at a
  re-attach), and a removed core's class goes with it
  (:mod:`os_brick_cas.io_class_table`).
"""

import contextlib
import dataclasses
import os
from typing import Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas import events
from os_brick_cas import exception
from os_brick_cas.host import core_tuning
from os_brick_cas import identity
from os_brick_cas import io_class_table
from os_brick_cas import labels
from os_brick_cas import locks
from os_brick_cas import modes
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import opencas_conf
from os_brick_cas import opts
from os_brick_cas import ownership
from os_brick_cas import policy as policy_mod
from os_brick_cas.privileged import devices as priv_devices
from os_brick_cas import rbd_names
from os_brick_cas import share_asks

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CachedDevice:
    """A device exported by Open CAS for one core."""

    cache_id: int
    core_id: int
    mode: modes.CacheMode
    path: str
    core_device: str
    #: this call made the exported device (added or re-activated the core)
    fresh: bool = False
    #: the share (whole percent) the core's IO class has now, or None
    share: Optional[int] = None


class VolumeCache(object):
    """The cache step of attach and detach, for one host."""

    def __init__(self, casadm: Optional[casadm_mod.Casadm] = None,
                 policy: Optional[policy_mod.CachePolicy] = None,
                 conf: cfg.ConfigOpts = cfg.CONF):
        self.casadm = casadm or casadm_mod.Casadm(conf)
        self._policy = policy
        self.conf = conf

    @property
    def policy(self) -> policy_mod.CachePolicy:
        """The injected policy, or one read from the current options."""
        return self._policy or policy_mod.CachePolicy.from_conf(self.conf)

    @property
    def opencas_conf_path(self) -> str:
        """The Open CAS configuration file this host's cores are kept in."""
        return self.conf[opts.GROUP].opencas_conf

    @property
    def _flush_timeout(self) -> int:
        return self.conf[opts.GROUP].flush_timeout

    def list_caches(self) -> list[casadm_output.CacheInstance]:
        return self.casadm.list_caches()

    @staticmethod
    def _mode_of(caches: list[casadm_output.CacheInstance],
                 cache_id: int) -> modes.CacheMode:
        for cache in caches:
            if cache.cache_id == cache_id:
                # 'wb->wt' while a mode switch flushes: still dirty-capable
                return modes.CacheMode(cache.mode.split('->')[0])
        raise exception.CacheNotFound(cache_id=cache_id)

    def attach(self, core_device: str, requested: modes.CacheMode,
               volume: str,
               caches: Optional[list[casadm_output.CacheInstance]] = None,
               spec: Optional[rbd_names.ImageSpec] = None,
               epoch: Optional[str] = None,
               owner_epoch: Optional[str] = ownership.UNKNOWN,
               share: Optional[int] = None
               ) -> Optional[CachedDevice]:
        """Cache *core_device* (a by-id link) in an instance for *requested*.

        The device behind the link must be the image the link names (and
        *spec*, if given): checked in krbd's sysfs before casadm runs.
        With an attachment *epoch*, an existing core is reused only by the
        attachment that added it; a clean core of another attachment is
        removed and added fresh, a dirty one only continues if
        *owner_epoch* (the owner Cinder names) is its attachment.
        *share* (whole percent) caps the core's part of its instance.
        Returns None when the fallback policy chose an uncached attach.
        """
        if caches is None:
            caches = self.casadm.list_caches()
        existing = self.casadm.find_core(caches, core_device)
        if existing is not None and epoch is not None:
            existing = self._claim(existing, volume, spec, caches, epoch,
                                   owner_epoch)
            if existing is None:
                caches = self.casadm.list_caches()
        if existing is not None:
            cached = self._reuse(existing, caches, requested, volume, spec)
            if epoch is not None:
                priv_devices.record_owner(core_device, epoch,
                                          cached.cache_id, cached.core_id)
            return self._with_share(cached, volume, share, new_core=False)
        added = self._add(core_device, requested, volume, caches, spec,
                          epoch, share)
        if added is None:
            return None
        cached, reserved = added
        if reserved.in_place:
            # its class went in before the add (Keeper.new_core)
            self._record_ask(cached, volume, share)
            return self._sharing(cached, volume, share, reserved.share)
        return self._with_share(cached, volume, share, new_core=True)

    def _with_share(self, cached: CachedDevice, volume: str,
                    share: Optional[int], new_core: bool) -> CachedDevice:
        """*cached* after its IO class was put in place (see Keeper.place).

        A share is a cap on cache use, not data safety: a table that
        cannot be loaded is logged and the volume stays attached uncapped
        (a new core's inherited drain class, if any, only keeps its writes
        synchronous to Ceph).
        """
        self._record_ask(cached, volume, share)
        try:
            now = io_class_table.Keeper(self.casadm).place(
                cached.cache_id, cached.core_id, share, new_core)
        except exception.CasError as exc:
            LOG.warning('Volume %(vol)s: could not load the IO classes of '
                        '%(core)s for its cache share %(share)s (%(err)s); '
                        'it is cached without its cap. If "os-brick-cas '
                        'status" shows it drained, run "os-brick-cas '
                        'undrain" for it.',
                        {'vol': volume, 'err': exc,
                         'share': '-' if share is None else '%d%%' % share,
                         'core': labels.core(cached.cache_id,
                                             cached.core_id)})
            return cached
        return self._sharing(cached, volume, share, now)

    @staticmethod
    def _sharing(cached: CachedDevice, volume: str, share: Optional[int],
                 now: Optional[int]) -> CachedDevice:
        """*cached* with the share *now* it has; a warning if not *share*."""
        if share is not None and now != share:
            LOG.warning('Volume %(vol)s asked for a %(share)d%% cache share '
                        'and has %(now)s (drained, or the IO-class budget '
                        'of instance %(cache)d is spent).',
                        {'vol': volume, 'share': share, 'cache':
                         cached.cache_id,
                         'now': 'none' if now is None else '%d%%' % now})
        return dataclasses.replace(cached, share=now)

    @staticmethod
    def _record_ask(cached: CachedDevice, volume: str,
                    share: Optional[int]) -> None:
        """Keep what *volume* asked for (status, doctor, the exporter).

        Only a report reads it: a record that cannot be written is logged
        and the attach goes on.
        """
        try:
            if share is not None:
                priv_devices.record_share(cached.core_device,
                                          cached.cache_id, cached.core_id,
                                          share)
            elif share_asks.read(cached.core_device) is not None:
                priv_devices.forget_share(cached.core_device)
        except Exception as exc:
            LOG.warning('Volume %(vol)s: could not record its cache share '
                        'ask (%(err)s); status and doctor will not know '
                        'it asked for one.', {'vol': volume, 'err': exc})

    def _claim(self, core: casadm_output.Core, volume: str,
               spec: Optional[rbd_names.ImageSpec],
               caches: list[casadm_output.CacheInstance], epoch: str,
               owner_epoch: Optional[str]) -> Optional[casadm_output.Core]:
        """*core* if attachment *epoch* may use it as it is, else None.

        None means the core of an earlier attachment was clean and has
        been removed: its cached lines may be older than Ceph's data.
        """
        record = ownership.read(core.device)
        if record is not None and record.epoch == epoch and \
                record.names_core(core.cache_id, core.core_id):
            return core
        dirty = self.casadm.dirty_blocks(core)
        if dirty == 0:
            LOG.info('Volume %(vol)s: %(core)s was added for attachment '
                     '%(old)s; removing it so attachment %(new)s never '
                     'reads its old cached lines.',
                     {'core': core.label,
                      'old': record.epoch if record else 'unknown',
                      'vol': volume, 'new': epoch})
            self.detach_core(core, volume, spec, caches)
            return None
        ownership.refuse_unless_owner('attach', volume, core.cache_id,
                                      core.core_id, record, owner_epoch,
                                      lambda: dirty)
        return core

    def _add(self, core_device: str, requested: modes.CacheMode,
             volume: str, caches: list[casadm_output.CacheInstance],
             spec: Optional[rbd_names.ImageSpec], epoch: Optional[str],
             share: Optional[int] = None
             ) -> Optional[tuple[CachedDevice,
                                 io_class_table.Reservation]]:
        """Add *core_device* as a new core of the instance for the mode.

        The core id is chosen first and its *share* loaded into the
        instance's table before casadm adds the core with that id; the
        reservation says whether that table is in place.
        """
        placement = self.policy.place(requested, caches)
        if not placement.cached:
            LOG.warning('Volume %(vol)s asked for cache mode %(mode)s, which '
                        'this host cannot serve; attaching it uncached as '
                        '[os_brick_cas] fallback_policy allows.',
                        {'vol': volume, 'mode': requested.value})
            return None
        if placement.fell_back:
            LOG.warning('Volume %(vol)s asked for cache mode %(req)s; using '
                        'mode %(mode)s instead as [os_brick_cas] '
                        'fallback_policy allows.',
                        {'vol': volume, 'req': requested.value,
                         'mode': placement.mode.value})
        mode = placement.mode
        cache_id = placement.cache_id
        if mode.holds_dirty_data:
            self._require_persistent_cache(cache_id, mode, volume)
        # the caller holds the volume's lock; the id is chosen and used
        # under the instance's IO-class table lock (held for the add only,
        # never across a flush), and record_core serialises opencas.conf
        identity.verify_link(core_device, 'add %s as a core' % core_device,
                             spec)
        keeper = io_class_table.Keeper(self.casadm)
        with keeper.new_core(cache_id, share) as reserved:
            try:
                core = self.casadm.add_core(cache_id, core_device,
                                            reserved.core_id)
            except exception.DeviceBusy:
                if not self._release_from_core_pool(core_device):
                    raise
                core = self.casadm.add_core(cache_id, core_device,
                                            reserved.core_id)
        if mode.holds_dirty_data or epoch is not None:
            recorded = False
            try:
                if mode.holds_dirty_data:
                    priv_devices.record_core(cache_id, core.core_id,
                                             core_device)
                    recorded = True
                if epoch is not None:
                    priv_devices.record_owner(core_device, epoch, cache_id,
                                              core.core_id)
            except Exception:
                LOG.exception('Could not record %(core)s in %(conf)s or '
                              'its ownership record; removing it again.',
                              {'core': labels.core(cache_id, core.core_id),
                               'conf': self.opencas_conf_path})
                # Nothing was written through it yet: removal is safe.
                self.casadm.remove_core(core)
                if recorded:
                    priv_devices.forget_core(cache_id, core.core_id,
                                             core_device)
                raise
        core_tuning.tune_new_core(self.casadm, core, self.conf)
        LOG.info('Volume %(vol)s cached in instance %(cache)s (%(mode)s) as '
                 '%(path)s', {'vol': volume, 'cache': cache_id,
                              'mode': mode.value, 'path': core.exported})
        return CachedDevice(cache_id, core.core_id, mode, core.exported,
                            core_device, fresh=True), reserved

    def _require_persistent_cache(self, cache_id: int,
                                  mode: modes.CacheMode, volume: str) -> None:
        listed = opencas_conf.read(self.opencas_conf_path)
        if not listed.lists_cache(cache_id):
            raise exception.CacheNotRunning(
                cache_id=cache_id, status='not persistent',
                advice='It runs in %s mode, so it can hold dirty data of '
                       'volume %s, but %s does not list it under [caches]; '
                       'after a reboot that data would not be reloaded. '
                       'Add the instance there and retry.'
                       % (mode.value, volume, self.opencas_conf_path))

    def _reuse(self, core: casadm_output.Core,
               caches: list[casadm_output.CacheInstance],
               requested: modes.CacheMode, volume: str,
               spec: Optional[rbd_names.ImageSpec]) -> CachedDevice:
        mode = self._mode_of(caches, core.cache_id)
        if mode != requested:
            LOG.warning('Volume %(vol)s is already %(core)s (%(mode)s) '
                        'while %(req)s was asked for; keeping it where its '
                        'cached data is.',
                        {'vol': volume, 'core': core.label,
                         'mode': mode.value, 'req': requested.value})
        fresh = not core.active
        if core.active:
            LOG.debug('Volume %(vol)s is already cached as %(path)s',
                      {'vol': volume, 'path': core.exported})
        else:
            identity.verify_link(core.device, 're-activate ' + core.label,
                                 spec)
            core = self._try_add(core, volume, spec)
            LOG.info('Re-activated inactive %(core)s for volume %(vol)s '
                     'as %(path)s', {'core': core.label, 'vol': volume,
                                     'path': core.exported})
        if mode.holds_dirty_data and not opencas_conf.read(
                self.opencas_conf_path).lists_core(
                    core.cache_id, core.core_id, core.device):
            priv_devices.record_core(core.cache_id, core.core_id,
                                     core.device)
        return CachedDevice(core.cache_id, core.core_id, mode,
                            core.exported or casadm_output.exported_path(
                                core.cache_id, core.core_id), core.device,
                            fresh=fresh)

    def detach(self, core_device: str, volume: str,
               spec: Optional[rbd_names.ImageSpec] = None) -> bool:
        """Flush (if needed) and remove the core added as *core_device*.

        Returns False if there was no such core. Raises, leaving the core
        and its data in place, when removing it could lose dirty data.
        """
        caches = self.casadm.list_caches()
        core = self.casadm.find_core(caches, core_device)
        if core is None:
            LOG.info('Volume %(vol)s has no Open CAS core for %(dev)s; '
                     'nothing to remove.',
                     {'vol': volume, 'dev': core_device})
            self.forget_stale_rows(core_device, caches)
            return False
        return self.detach_core(core, volume, spec, caches)

    def detach_core(self, core: casadm_output.Core, volume: str,
                    spec: Optional[rbd_names.ImageSpec] = None,
                    caches: Optional[list[casadm_output.CacheInstance]] = None
                    ) -> bool:
        """Flush (if needed) and remove *core*, whose link must name *spec*.

        Before a flush or removal writes through the core, krbd's sysfs
        must confirm the device behind its link is that image.
        """
        if caches is None:
            caches = self.casadm.list_caches()
        mode = self._mode_of(caches, core.cache_id)
        # casadm's dirty count decides, not the mode: an operator may have
        # left write-back with '-Q -c wt -f no', which keeps dirty blocks
        dirty = (mode.holds_dirty_data or
                 self.casadm.dirty_blocks(core) > 0)
        # flushes of one instance are serialised (casadm refuses a second
        # one with "Another flush operation in progress"); removing a clean
        # core of a clean instance flushes nothing and needs no cache lock
        with (locks.cache_lock(core.cache_id) if dirty
              else contextlib.nullcontext()):
            if not core.active:
                core = self._reactivate_for_removal(core, volume, spec)
            if core.active:
                identity.verify_link(core.device,
                                     'flush and remove ' + core.label, spec)
                if dirty:
                    LOG.info('Flushing volume %(vol)s (%(core)s) before '
                             'removal', {'vol': volume, 'core': core.label})
                    with events.timed('flush'):
                        self.casadm.flush(core.cache_id, core.core_id,
                                          self._flush_timeout)
                self.casadm.remove_core(core)
            # removed, active or (clean) inactive: its class (drain or
            # share, in any mode) must not pass to the next core N
            drain_mod.DrainManager(self.casadm).drop_class_of_removed_core(
                core.cache_id, core.core_id)
            if dirty or opencas_conf.read(self.opencas_conf_path).lists_core(
                    core.cache_id, core.core_id, core.device):
                priv_devices.forget_core(core.cache_id, core.core_id,
                                         core.device)
            if ownership.read(core.device) is not None:
                priv_devices.forget_owner(core.device, core.cache_id,
                                          core.core_id)
            if share_asks.read(core.device) is not None:
                priv_devices.forget_share(core.device)
        LOG.info('Removed volume %(vol)s from instance %(cache)s',
                 {'vol': volume, 'cache': core.cache_id})
        return True

    def _reactivate_for_removal(self, core: casadm_output.Core, volume: str,
                                spec: Optional[rbd_names.ImageSpec]
                                ) -> casadm_output.Core:
        """Deal with an inactive core: remove it if clean, else re-activate.

        Returns the core, active if it had to be re-activated so its dirty
        data can be flushed; an inactive clean core has been removed.
        """
        dirty = self.casadm.dirty_blocks(core)
        if not dirty:
            try:
                self.casadm.remove_inactive_core(core)
            except exception.CoreActive:
                # the udev loader re-added it since our -L: remove it active
                now = self._active_now(core)
                if now is None:
                    raise
                return self._loader_won(now, volume, spec)
            return core
        if self._is_own_device(core, spec):
            LOG.info('Re-activating inactive %(core)s to flush %(dirty)s '
                     'dirty blocks of volume %(vol)s',
                     {'core': core.label, 'dirty': dirty, 'vol': volume})
            return self._try_add(core, volume, spec)
        raise exception.InactiveCoreDeviceMissing(
            action='remove the inactive core of volume %s (its device %s is '
                   'not present; attach the volume again so the data can be '
                   'flushed)' % (volume, core.device),
            core=core.core_id, cache_id=core.cache_id, dirty=dirty)

    def _try_add(self, core: casadm_output.Core, volume: str,
                 spec: Optional[rbd_names.ImageSpec]) -> casadm_output.Core:
        """Re-activate inactive *core*, tolerating Open CAS's udev loader.

        open-cas-loader try-adds a core listed in opencas.conf as soon as
        its by-id link appears, so ours can find it already added ("Device
        already added as a core"). Then the core is listed again and used
        if it is that core, now active, and krbd still says the device
        behind its link is the image (the loader checks only a path and a
        size).
        """
        self._require_running(core)
        try:
            added = self.casadm.try_add_core(core.cache_id, core.core_id,
                                             core.device)
        except exception.CoreAlreadyCached:
            now = self._active_now(core)
            if now is None:
                raise
            return self._loader_won(now, volume, spec)
        # exit 0 also when the cache stopped meanwhile: then the device
        # sits in the core pool instead, and the core is still inactive
        if self._release_from_core_pool(core.device):
            raise exception.CacheNotRunning(
                cache_id=core.cache_id, status='not running',
                advice='It stopped while core %d was being re-activated, '
                       'so Open CAS parked %s in its core pool (released '
                       'again). Load the cache (casadm --start-cache '
                       '--load) and retry.' % (core.core_id, core.device))
        return added

    def _require_running(self, core: casadm_output.Core) -> None:
        """Refuse a try-add for a cache that is not running.

        casadm would accept it and park the device in the core pool, where
        it blocks every later --add-core of it.
        """
        if not any(cache.cache_id == core.cache_id
                   for cache in self.casadm.list_caches()):
            raise exception.CacheNotRunning(
                cache_id=core.cache_id, status='not running',
                advice='Core %d (%s) cannot be re-activated before the '
                       'cache is loaded (casadm --start-cache --load).'
                       % (core.core_id, core.device))

    def _release_from_core_pool(self, device: str) -> bool:
        """Take *device* out of the core pool if it is there."""
        if device not in self.casadm.core_pool():
            return False
        LOG.warning('%(dev)s was parked in the Open CAS core pool (a '
                    'try-add for a cache that was not running); releasing '
                    'it.', {'dev': device})
        self.casadm.remove_detached(device)
        return True

    def _active_now(self, core: casadm_output.Core
                    ) -> Optional[casadm_output.Core]:
        """*core* as listed now, if it is that same core and active."""
        now = self.casadm.find_core(self.casadm.list_caches(), core.device)
        if now is None or not now.active or (
                now.cache_id, now.core_id) != (core.cache_id, core.core_id):
            return None
        return now

    def _loader_won(self, now: casadm_output.Core, volume: str,
                    spec: Optional[rbd_names.ImageSpec]) -> casadm_output.Core:
        """Go on with a core the udev loader re-activated (identity first)."""
        identity.verify_link(now.device, 'use %s re-activated by the Open '
                             'CAS udev loader' % now.label, spec)
        LOG.info('Volume %(vol)s: %(core)s was re-activated by the Open CAS '
                 'udev loader first; using it.',
                 {'core': now.label, 'vol': volume})
        return now

    @staticmethod
    def _is_own_device(core: casadm_output.Core,
                       spec: Optional[rbd_names.ImageSpec]) -> bool:
        """Whether *core*'s link resolves to its own image's device now.

        After a reboot krbd hands out device numbers anew: an old link may
        exist and lead to another image's device (never try-add that).
        """
        if not os.path.exists(core.device):
            return False
        try:
            identity.verify_link(core.device, 're-activate ' + core.label,
                                 spec)
        except exception.ImageIdentityMismatch as exc:
            LOG.warning('Not re-activating through %(link)s: %(err)s',
                        {'link': core.device, 'err': exc})
            return False
        return True

    def forget_stale_rows(self, core_device: str,
                          caches: list[casadm_output.CacheInstance]) -> None:
        """Drop opencas.conf rows for *core_device* in running instances.

        A row of an instance that is not running is kept: that instance may
        still hold the core's dirty data and needs the row to reload it.
        """
        running = {cache.cache_id for cache in caches}
        listed = opencas_conf.read(self.opencas_conf_path)
        for (cache_id, core_id), device in listed.cores.items():
            if device != core_device:
                continue
            if cache_id not in running:
                LOG.warning('%(conf)s lists %(dev)s as %(core)s, which is '
                            'not running; keeping the row so its data can '
                            'be reloaded.',
                            {'conf': self.opencas_conf_path, 'dev': device,
                             'core': labels.core(cache_id, core_id)})
                continue
            LOG.info('Dropping stale opencas.conf row %(cache)s/%(core)s for '
                     '%(dev)s', {'cache': cache_id, 'core': core_id,
                                 'dev': core_device})
            priv_devices.forget_core(cache_id, core_id, device)
