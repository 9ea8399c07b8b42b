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

"""Libvirt volume driver for cacheable RBD volumes.

connect: krbd + Open CAS through :class:`os_brick_cas.connector.
CachedRBDConnector`, the exported ``/dev/casX-Y`` goes to
``connection_info['data']['device_path']``; get_config: a block disk on
that path (nova's _set_cache_mode then gives it the cache/io settings of
every block volume). Encryptors attach after connect, on top of the CAS
device, so the SSD only ever holds ciphertext.
"""

import contextlib

import nova.conf
from nova import exception as nova_exception
from nova import utils as nova_utils
from nova.virt.libvirt.volume import net
from nova.virt.libvirt.volume import volume as libvirt_volume
from oslo_log import log as logging
from oslo_utils import excutils

from nova_ext import compat
from nova_ext import fence
from nova_ext import opts
from os_brick_cas import connector as cas_connector
from os_brick_cas import exception as cas_exception
from os_brick_cas import fence as cas_fence
from os_brick_cas import lifecycle as cas_lifecycle
from os_brick_cas import locks
from os_brick_cas import volume as cas_volume

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: errors that mean "this host has no usable cache for the volume"
NO_CACHE_ERRORS = (cas_exception.CasadmNotFound,
                   cas_exception.CasModuleNotLoaded,
                   cas_exception.NoCacheForMode,
                   cas_exception.CacheNotFound,
                   cas_exception.CacheNotRunning)

FENCE_UNUSED = 'unused'
FENCE_SET = 'set'
FENCE_HELD = 'held'
FENCE_TAKEN = 'taken'


class VolumeFenced(nova_exception.Invalid):
    msg_fmt = ('Volume %(volume)s may still hold write-back data in the '
               'Open CAS cache of host %(fenced)s, so it cannot be attached '
               'on %(host)s. Detach it cleanly on %(fenced)s; only if that '
               'host is lost for good, clear the marker knowingly with '
               "'os-brick-cas fence-clear %(volume)s --host-lost'.")


def _clear_fence(volume: cas_volume.RBDVolume, when: str,
                 expect=cas_fence.UNSET) -> None:
    """Clear *volume*'s fence marker; log what to do if that fails."""
    try:
        fence.client().clear(volume.volume_id, expect=expect)
    except Exception:
        LOG.exception('Could not clear the fence marker of volume %s %s; '
                      'clear it with "os-brick-cas fence-clear %s" before '
                      'attaching it on another host.', volume.label, when,
                      volume.volume_id)


class LibvirtCachedRBDVolumeDriver(libvirt_volume.LibvirtBaseVolumeDriver):
    """Cacheable RBD volumes as Open CAS block disks."""

    def __init__(self, host, connector=None):
        super().__init__(host, is_block_dev=True)
        self.connector = connector or cas_connector.CachedRBDConnector(
            nova_utils.get_root_helper())
        self.net_driver = net.LibvirtNetVolumeDriver(host)
        self._tolerated: set[str] = set()

    @staticmethod
    def cached_path(connection_info) -> str | None:
        path = connection_info['data'].get('device_path')
        return path if path and path.startswith('/dev/') else None

    def get_config(self, connection_info, disk_info):
        """Block disk on the CAS device; network disk if attached uncached.

        Works from connection_info alone: during live migration the source
        builds the destination's XML from what the destination stored.
        """
        path = self.cached_path(connection_info)
        if path is None:
            return self.net_driver.get_config(connection_info, disk_info)
        conf = super().get_config(connection_info, disk_info)
        conf.source_type = 'block'
        conf.source_path = path
        # as nova's other block-device volume drivers (iscsi, fc) do
        if compat.block_volume_aio_native():
            conf.driver_io = 'native'
        return conf

    @staticmethod
    def _attachment_id(connection_info) -> str | None:
        """The Cinder attachment (our epoch): cinder puts it at the top."""
        return (connection_info.get('attachment_id') or
                connection_info['data'].get('attachment_id'))

    @staticmethod
    def _owner_epoch(owner: cas_fence.Owner | None) -> str | None:
        """``cas_owner_epoch`` for the host library (see RBDVolume)."""
        if owner is None or owner.host != CONF.host:
            return ''           # whatever this host caches is not newest
        return owner.epoch      # None: a marker from before epochs

    def _fence_check_and_set(self, volume: cas_volume.RBDVolume,
                             data: dict, epoch: str | None
                             ) -> tuple[str, cas_fence.Owner | None]:
        """Refuse if fenced by another host, else fence it to this host.

        Checked for every cacheable volume, whatever its mode now (it may
        have been retyped while another host still held its newest
        writes). A marker of another host that *drained* the volume (a
        live migration's source) is taken over: Ceph has every write it
        acknowledged and it cannot cache new ones. Returns (state, owner
        before this attach): FENCE_SET if this call set the marker,
        FENCE_TAKEN if it took it over, FENCE_HELD if it already named
        this host (its newest writes may be in this host's cache, e.g. an
        inactive core after a reboot), FENCE_UNUSED if no marker is kept.
        """
        for key in ('cas_epoch', 'cas_owner_epoch'):
            data.pop(key, None)
        if epoch:
            # a core is reused only by the attachment that added it
            data['cas_epoch'] = epoch
        if not CONF[opts.GROUP].use_fence_marker:
            return FENCE_UNUSED, None
        client = fence.client()
        owner = client.owner(volume.volume_id)
        if owner and owner.host != CONF.host and not owner.drained:
            raise VolumeFenced(volume=volume.volume_id, fenced=owner.host,
                               host=CONF.host)
        if epoch:
            owner_epoch = self._owner_epoch(owner)
            if owner_epoch is not None:
                data['cas_owner_epoch'] = owner_epoch
        if not volume.mode.holds_dirty_data:
            return FENCE_UNUSED, owner
        if owner is not None and owner.host != CONF.host:
            LOG.info('Volume %(vol)s was drained by host %(host)s '
                     '(attachment %(epoch)s); this host takes its fence '
                     'marker over', {'vol': volume.label, 'host': owner.host,
                                     'epoch': owner.epoch})
            client.set(volume.volume_id, CONF.host, epoch, expect=owner)
            if epoch:
                data['cas_owner_epoch'] = epoch
            return FENCE_TAKEN, owner
        if owner is not None:
            return FENCE_HELD, owner
        client.set(volume.volume_id, CONF.host, epoch, expect=None)
        return FENCE_SET, owner

    def connect_volume(self, connection_info, instance):
        """Fence the volume to this host, then cache it: one locked step.

        The fence marker's check and compare-and-swap, the connector's
        attach, the re-own of a held marker and the undo of a failed
        attach all run under the volume's lock (re-entrant: the
        connector takes it again), so no drain, undrain, flush or detach
        of the CLI, the periodic task or another nova thread lands
        between the marker write and the host change.
        """
        data = connection_info['data']
        volume = cas_volume.from_connection_properties(data)
        with locks.volume_lock(volume.spec):
            self._connect_locked(connection_info, volume, instance)

    def _connect_locked(self, connection_info,
                        volume: cas_volume.RBDVolume, instance) -> None:
        data = connection_info['data']
        self._resolve_unfinished(volume)
        epoch = self._attachment_id(connection_info)
        fence_state, owner = self._fence_check_and_set(volume, data, epoch)
        try:
            device_info = self.connector.connect_volume(data)
        except NO_CACHE_ERRORS as exc:
            # the connector rolled back: nothing of this volume is cached
            self._undo_fence(volume, fence_state, owner, epoch)
            if (CONF[opts.GROUP].no_cache_action == opts.NO_CACHE_FAIL or
                    fence_state == FENCE_HELD):
                raise
            LOG.warning('No usable Open CAS cache for volume %(vol)s '
                        '(%(err)s); attaching it uncached as a librbd '
                        'network disk.', {'vol': volume.label, 'err': exc},
                        instance=instance)
            data.pop('device_path', None)
            return
        except Exception:
            with excutils.save_and_reraise_exception():
                self._undo_fence(volume, fence_state, owner, epoch)
        if fence_state == FENCE_HELD and epoch and owner.epoch != epoch:
            # this attachment now owns the data the earlier one cached
            fence.client().set(volume.volume_id, CONF.host, epoch,
                               expect=owner)
        data['device_path'] = device_info['path']
        LOG.info('Volume %(vol)s attached through Open CAS as %(path)s',
                 {'vol': volume.label, 'path': device_info['path']},
                 instance=instance)

    def _resolve_unfinished(self, volume: cas_volume.RBDVolume) -> None:
        """Finish a drain or undrain a stopped process left, first."""
        record = cas_lifecycle.read_record(volume.spec)
        if not record or record.state not in (
                cas_lifecycle.DRAINING, cas_lifecycle.UNDRAINING):
            return
        why = cas_lifecycle.Lifecycle(
            self.connector.volume_cache.casadm).resolve(
                volume.spec, self.cinder_view(), cas_lifecycle.deadline())
        if why:
            raise cas_exception.TransitionRefused(
                action='attach', volume=volume.label, reason=why)

    @staticmethod
    def _undo_fence(volume: cas_volume.RBDVolume, fence_state: str,
                    previous: cas_fence.Owner | None,
                    epoch: str | None) -> None:
        """Clear a marker this attach set, or hand a taken one back.

        Compare-and-swap on the marker this attach wrote: if someone
        changed it meanwhile, theirs stays.
        """
        ours = cas_fence.Owner(CONF.host, epoch, False)
        if fence_state == FENCE_SET:
            _clear_fence(volume, 'after its attach failed (nothing of it is '
                                 'cached on this host)', expect=ours)
        elif fence_state == FENCE_TAKEN and previous is not None:
            try:
                fence.client().set(volume.volume_id, previous.host,
                                   previous.epoch, drained=previous.drained,
                                   expect=ours)
            except Exception:
                LOG.exception('Could not hand the fence marker of volume '
                              '%s back to host %s after this attach failed; '
                              'nothing of it is cached here.', volume.label,
                              previous.host)

    def _set_owner(self, data: dict, volume: cas_volume.RBDVolume
                   ) -> cas_fence.Owner | None:
        """Put the owner Cinder names *now* into *data*; return it.

        What connect stored in the BDM's connection_info may be stale.
        """
        data.pop('cas_owner_epoch', None)
        if not CONF[opts.GROUP].use_fence_marker:
            return None
        owner = fence.client().owner(volume.volume_id)
        owner_epoch = self._owner_epoch(owner)
        if owner_epoch is not None:
            data['cas_owner_epoch'] = owner_epoch
        return owner

    def flush(self, connection_info) -> bool:
        """Flush an attached cached volume in place (bounded)."""
        data = connection_info['data']
        volume = cas_volume.from_connection_properties(data)
        with locks.volume_lock(volume.spec):
            self._set_owner(data, volume)
            return self.connector.flush_volume(data)

    @staticmethod
    def cinder_view() -> cas_lifecycle.Cinder:
        """The fence marker as this nova-compute reaches it."""
        if not CONF[opts.GROUP].use_fence_marker:
            return cas_lifecycle.Cinder(CONF.host, in_use=False)
        return cas_lifecycle.Cinder(CONF.host, fence.client())

    @staticmethod
    def _subject(connection_info) -> cas_lifecycle.Volume:
        volume = cas_volume.from_connection_properties(
            connection_info['data'])
        return cas_lifecycle.Volume(volume.spec, volume.volume_id)

    def drain(self, connection_info,
              limit: cas_lifecycle.Deadline | None = None,
              holder: str = cas_lifecycle.OPERATOR,
              instance_uuid: str | None = None) -> bool:
        """Drain an attached volume, then tell Cinder (see lifecycle).

        Afterwards Ceph has every write the guest got acknowledged, no
        write can get dirty, and the fence marker says so: another host
        may attach the volume (a live migration's destination) and Cinder
        allows snapshots of it. *holder* names the nova operation the
        drain is kept for, recorded on the host until it ends. Returns
        False if the volume has no active core here.
        """
        subject = self._subject(connection_info)
        machine = cas_lifecycle.Lifecycle(self.connector.volume_cache.casadm)
        if cas_lifecycle.state(machine.casadm, subject.spec) in (
                cas_lifecycle.ABSENT, cas_lifecycle.INACTIVE):
            return False
        machine.drain(subject, self.cinder_view(),
                      limit or cas_lifecycle.deadline(), holder=holder,
                      instance=instance_uuid)
        return True

    def is_drained(self, connection_info) -> bool:
        """Whether the volume's core here is drained now."""
        return self.connector.is_drained(connection_info['data'])

    def drain_blocker(self, connection_info) -> str | None:
        """Why this host cannot drain the volume; None if it can."""
        return self.connector.drain_blocker(connection_info['data'])

    def _cached_epoch(self, connection_info) -> str | None:
        """The attachment whose data this host's core holds."""
        return (self.connector.cached_epoch(connection_info['data']) or
                self._attachment_id(connection_info))

    def reclaim_drained(self, connection_info) -> None:
        """Name this host (still drained) in the marker again.

        For a volume that stays drained here after a failed live
        migration whose destination had taken the marker over. Only
        after a fresh listing shows it drained (the stronger view).
        """
        subject = self._subject(connection_info)
        cas_lifecycle.Lifecycle(self.connector.volume_cache.casadm).reclaim(
            subject, self.cinder_view(), cas_lifecycle.deadline(),
            self._cached_epoch(connection_info))

    def undrain(self, connection_info, retake: bool = False,
                holder: str | None = None,
                limit: cas_lifecycle.Deadline | None = None) -> bool:
        """Own the volume's data again, then let its core cache writes.

        For a guest that stays on this host (a failed or aborted live
        migration, an unquiesced snapshot): the fence marker is set to
        this host and the attachment of its core *before* the core may
        get dirty (compare-and-swap). A marker naming another host is
        taken back only with *retake* - the caller knows that host never
        ran the guest (a live migration that failed before its
        switchover). With *holder*, only a drain nova holds for that
        operation is undone. Returns False if the volume stays drained
        or was not drained; errors are logged with what to do.
        """
        subject = self._subject(connection_info)
        machine = cas_lifecycle.Lifecycle(self.connector.volume_cache.casadm)
        try:
            return machine.undrain(subject, self.cinder_view(),
                                   limit or cas_lifecycle.deadline(),
                                   retake=retake, holder=holder)
        except cas_exception.TransitionRefused as exc:
            LOG.error('%s', exc)
            return False

    @contextlib.contextmanager
    def keeping_data_on_failed_detach(self, volume_id: str):
        """While this lasts, a failed detach of *volume_id* is not fatal.

        For the old volume of a swap after the pivot: the guest already
        runs on the new volume, so failing would make nova roll back the
        wrong attachment. The core, its dirty data, its opencas.conf row
        and the fence marker stay (see "Orphaned dirty core" runbook).
        """
        self._tolerated.add(volume_id)
        try:
            yield
        finally:
            self._tolerated.discard(volume_id)

    def disconnect_volume(self, connection_info, instance, force=False):
        data = connection_info['data']
        volume = cas_volume.from_connection_properties(data)
        if volume.volume_id in self._tolerated:
            try:
                self._disconnect(data, volume, instance, force)
            except cas_exception.CasError as exc:
                LOG.error('Volume %(vol)s was swapped out, but its cached '
                          'data could not be written to Ceph: %(err)s. The '
                          'core and its data stay on this host and its '
                          'fence marker stays set; see "Orphaned dirty '
                          'core" in the admin guide.',
                          {'vol': volume.label, 'err': exc},
                          instance=instance)
            return
        self._disconnect(data, volume, instance, force)

    def _disconnect(self, data: dict, volume: cas_volume.RBDVolume,
                    instance, force: bool) -> None:
        """Flush, detach, then clear this host's marker: one locked step.

        The owner is read, the core removed and the marker cleared under
        the volume's lock (re-entrant: the connector takes it again).
        """
        with locks.volume_lock(volume.spec):
            self._disconnect_locked(data, volume, instance, force)

    def _disconnect_locked(self, data: dict, volume: cas_volume.RBDVolume,
                           instance, force: bool) -> None:
        # a drain or undrain a stopped process left is resolved first
        self._resolve_unfinished(volume)
        # who owns the newest data now (an evacuation may have moved it)
        owner = self._set_owner(data, volume)
        try:
            # raises, leaving everything in place, if dirty data could be
            # lost; refuses to write data this host no longer owns
            self.connector.disconnect_volume(data, None, force=force)
        except cas_exception.NotDataOwner as exc:
            # e.g. the instance was evacuated while this host was down:
            # keep the stale blocks, never write them over newer data
            LOG.warning('Leaving the cached data of volume %(vol)s on this '
                        'host untouched: %(err)s',
                        {'vol': volume.label, 'err': exc}, instance=instance)
            return
        if owner is not None and owner.host == CONF.host:
            _clear_fence(volume, 'after it was flushed and detached',
                         expect=owner)

    def extend_volume(self, connection_info, instance, requested_size):
        return self.connector.extend_volume(connection_info['data'])
