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

"""Exceptions of os-brick-cas.

Every message names the object involved and says what an operator can do.
All derive from os-brick's BrickException so callers that already catch
os-brick errors (nova's volume drivers) keep working.
"""

from typing import Any, Optional

from os_brick import exception as brick_exception

from os_brick_cas import labels


class CasError(brick_exception.BrickException):
    """Base class of every os-brick-cas error.

    Given ``cache_id`` and ``core``, a message names the core as
    :func:`os_brick_cas.labels.core` does (``%(core_label)s``).
    """

    message = "An unknown Open CAS error occurred."

    def __init__(self, message: Optional[str] = None, **kwargs: Any):
        if 'cache_id' in kwargs and 'core' in kwargs:
            kwargs.setdefault('core_label', labels.core(kwargs['cache_id'],
                                                        kwargs['core']))
        super().__init__(message, **kwargs)


class InvalidInput(CasError, ValueError):
    """A caller passed something the suite refuses before running anything."""

    message = "Invalid %(what)s %(value)r: %(reason)s"


class InvalidConnectionInfo(InvalidInput):
    message = ("Malformed RBD connection information for volume "
               "%(volume)s: %(reason)s")


class CasadmNotFound(CasError):
    message = ("The casadm command was not found on PATH. Install Open CAS "
               "(casadm and the cas_cache kernel module) on this host.")


class CasModuleNotLoaded(CasError):
    message = ("The Open CAS kernel module is not loaded (%(detail)s). Load "
               "it with 'modprobe cas_cache' and start the caches "
               "('casctl start').")


class CasadmCommandFailed(CasError):
    """casadm exited non-zero with an error this suite has no class for."""

    message = ("casadm %(operation)s failed (exit code %(exit_code)s): "
               "%(detail)s")


class CasadmTimedOut(CasadmCommandFailed):
    """A casadm call ran out of its time bound and was killed."""

    message = ("casadm %(operation)s did not finish within %(timeout)s s "
               "and was killed; what it did is what 'casadm -L' shows now. "
               "Check the host (dmesg, Open CAS) and retry. Raise "
               "[os_brick_cas] casadm_timeout only if casadm is known to be "
               "slow here.")


class RbdTimedOut(CasError):
    """An rbd map or unmap ran out of its time bound and was killed."""

    message = ("rbd %(operation)s of volume %(volume)s did not finish within "
               "%(timeout)s s and was killed (%(state)s). Check the Ceph "
               "cluster's health and this host's network to it, then retry; "
               "[os_brick_cas] rbd_timeout sets the bound.")


class LockTimedOut(CasError):
    """Waiting for a host lock took longer than lock_timeout."""

    message = ("Waited %(timeout)s s for the lock of %(what)s, which "
               "another attach, detach or flush on this host still holds; "
               "nothing was changed. Retry when it has finished (a flush "
               "can take up to [os_brick_cas] flush_timeout).")


class CasadmBusy(CasadmCommandFailed):
    """A transient refusal ('Try again', another flush running)."""

    message = ("casadm %(operation)s was refused for now (%(detail)s); it "
               "was retried and kept failing. Retry later.")


class CacheNotFound(CasError):
    message = ("Open CAS cache instance %(cache_id)s does not exist on this "
               "host. Start it (casctl start) or fix the mode to cache "
               "instance map in [os_brick_cas] cache_instances.")


class CacheNotRunning(CasError):
    message = ("Open CAS cache instance %(cache_id)s is %(status)s, not "
               "Running. %(advice)s")


class OpenCasDataLossDefect(CasError):
    """The loaded Open CAS release can lose this mode's writes."""

    message = ("Open CAS %(version)s, loaded on this host, has a known "
               "defect that can lose acknowledged %(mode)s writes "
               "(%(defect)s: %(summary)s). Mode %(mode)s is not offered for "
               "new attaches here. Load a module built with the "
               "os_brick_cas role's patch series, install an Open CAS "
               "release without it (v25.12.2 or v24.9), offer wt instead, "
               "or, knowing your "
               "guests cannot trigger it, accept it in [os_brick_cas] "
               "accepted_data_loss_defects = %(defect)s.")


class CacheModeMismatch(CasError):
    message = ("[os_brick_cas] cache_instances maps mode %(mode)s to cache "
               "instance %(cache_id)s, but that instance runs in mode "
               "%(actual)s. Instances on this host: %(present)s. Fix the "
               "option or the instance's mode.")


class NoCacheForMode(CasError):
    message = ("No usable Open CAS cache instance for mode %(mode)s on this "
               "host (%(reason)s). Configure one in [os_brick_cas] "
               "cache_instances, or allow a safe fallback with "
               "[os_brick_cas] fallback_policy.")


class CoreAlreadyCached(CasError):
    message = ("Device %(device)s is already a core of another cache "
               "instance (%(detail)s). Remove it there first "
               "('os-brick-cas status' shows where).")


class DeviceBusy(CasError):
    message = ("Device %(device)s is busy: %(detail)s. Close whatever holds "
               "it (the guest disk must be detached first) and retry.")


class DirtyDataPresent(CasError):
    """Refusal to do something that would drop write-back dirty data."""

    message = ("Refusing to %(action)s: %(core_label)s still holds "
               "%(dirty)s dirty 4 KiB blocks that "
               "are not yet in Ceph. Flush it ('os-brick-cas flush --volume "
               "...') and retry; nothing was removed.")


class CachedDataMayBeNewer(CasError):
    """A stopped cache of this host may hold the volume's newest data."""

    message = ("Refusing to %(action)s volume %(volume)s: %(conf)s lists it "
               "as %(core_label)s, which is "
               "%(state)s, so that cache may hold data of the volume that "
               "Ceph does not have. Start the cache (casctl start, or "
               "casadm --start-cache --load) so the core is reloaded, then "
               "retry. If the cache device is lost for good, follow "
               "\"Cache SSD dead\" in the admin guide.")


class NotDataOwner(CasError):
    """This host's cached data of a volume belongs to an older attachment."""

    message = ("Refusing to %(action)s volume %(volume)s: %(core_label)s "
               "holds %(dirty)s dirty blocks of "
               "attachment %(epoch)s, but the volume's fence marker names "
               "%(owner)s as the owner of its newest data, so these blocks "
               "may be older than what Ceph has. Nothing was changed: the "
               "image is not mapped for them and the core stays as it is. "
               "See \"Host returns\" in the admin guide before discarding "
               "them.")


class IoClassBudgetSpent(CasError):
    """No IO class id is left on an instance (at most 33, ids 0-32)."""

    message = ("Cannot drain %(core_label)s: "
               "its IO-class table already uses all 33 classes. Undrain "
               "another volume of this instance first.")


class DrainUnsupported(CasError):
    """This host cannot drain (Open CAS release or instance state)."""

    message = "Cannot drain on this host: %(reason)s"


class InactiveCoreDeviceMissing(DirtyDataPresent):
    """An inactive core holds dirty data and its RBD device is not mapped.

    The connector maps the volume again so the core can be re-activated
    and flushed; raised to the caller only if that is not possible.
    """


class FlushFailed(CasError):
    message = ("Flushing %(core_label)s failed: "
               "%(detail)s. The core, its dirty data and the RBD mapping "
               "were left in place; fix the cause (see dmesg) and retry "
               "the detach.")


class FlushTimedOut(FlushFailed):
    message = ("Flushing %(core_label)s did not "
               "finish within %(timeout)s s. The core, its dirty data and "
               "the RBD mapping were left in place; retry the detach or "
               "raise [os_brick_cas] flush_timeout.")


class CoreRemovalFailed(CasError):
    message = ("Removing %(core_label)s failed "
               "after its device was detached (%(detail)s): the core is now "
               "inactive and its dirty data is kept in the cache (instance "
               "incomplete); the RBD mapping and the opencas.conf row were "
               "left in place. Fix the cause (see dmesg) and retry the "
               "detach, which re-activates and flushes the core.")


class CoreInactive(CasError):
    message = ("Open CAS %(core_label)s is inactive "
               "(its device %(device)s is missing). Re-attach the volume so "
               "it is re-activated before removing it.")


class DeviceLinkConflict(CasError):
    message = ("%(link)s points to %(actual)s, not to %(expected)s (the "
               "device of RBD image %(image)s). Another image's link has the "
               "same name; remove the stale link and retry.")


class ImageIdentityMismatch(CasError):
    """The device behind a link or mapping is not the expected RBD image."""

    message = ("Refusing to %(action)s: %(path)s should be the krbd device "
               "of RBD image %(expected)s, but %(reason)s. Nothing was "
               "changed. Check 'rbd showmapped' and the links under "
               "/dev/disk/by-id; re-attach the volume so os-brick-cas "
               "links its own device.")


class AmbiguousCore(CasError):
    """More than one core could belong to a volume; none is touched."""

    message = ("Refusing to %(action)s volume %(volume)s: %(reason)s. "
               "Nothing was changed; see 'os-brick-cas status' and the "
               "upgrade notes.")


class OpenCasConfRefused(CasError, ValueError):
    message = ("Not writing opencas.conf row %(row)r: %(reason)s.")


class CoreNotFound(CasError):
    message = ("Open CAS %(core_label)s does not exist "
               "(%(detail)s); it was removed meanwhile. See 'os-brick-cas "
               "status' and retry.")


class CoreActive(CasError):
    """--remove-inactive on a core whose device is present again."""

    message = ("Open CAS %(core_label)s is active again "
               "(%(detail)s), e.g. re-added by Open CAS's udev loader. Retry "
               "the detach: an active core is flushed and removed.")


class DeviceHeldByCore(CasError):
    """krbd refused to unmap a device an Open CAS core still holds."""

    message = ("Refusing to unmap %(device)s of volume %(volume)s: it is "
               "held by %(holder)s (krbd: %(detail)s). Nothing was unmapped "
               "or removed, and it is never force-unmapped (a core on a "
               "vanished device keeps its dirty data but can no longer "
               "flush it). Remove that core first (casadm --remove-core "
               "flushes it) and retry the detach.")


class CasadmTooOld(CasadmCommandFailed):
    """casadm did not understand an option os-brick-cas relies on."""

    message = ("casadm %(operation)s was not understood (%(detail)s): this "
               "Open CAS release is older than os-brick-cas supports (v24.9, "
               "whose per-core flush is '-F -i I -j J'; older ones use -E). "
               "Nothing was changed. Upgrade Open CAS; 'os-brick-cas doctor' "
               "checks the release.")


class FenceConflict(CasError):
    """The fence marker was not what a compare-and-swap change expected.

    Cinder changed nothing. *current* is the record Cinder holds now
    (an ``os_brick_cas.fence.Owner``, or None: no marker).
    """

    message = ("The fence marker of volume %(volume)s was not changed: the "
               "change expected %(expected)s, but Cinder holds "
               "%(current_label)s (another host, nova-compute or an "
               "operator changed it meanwhile). Read it again "
               "('os-brick-cas fence-show %(volume)s') and retry only if "
               "the change still applies.")

    def __init__(self, message=None, current=None, **kwargs):
        self.current = current
        super().__init__(message, **kwargs)


class TransitionRefused(CasError):
    """A life-cycle transition that would break the host/Cinder rule."""

    message = ("%(action)s of volume %(volume)s refused: %(reason)s")


class HostLayoutInvalid(CasError):
    """The host layout file has fields os-brick-cas cannot use."""

    message = ("Host layout %(path)s is invalid; nothing was changed:\n"
               "%(problems)s")


class HostLayoutRefused(CasError):
    """``host apply`` will not do what the layout asks on this host."""

    message = ("Refusing to apply the host layout to cache instance "
               "%(cache_id)s: %(reason)s")


class CacheDeviceHasMetadata(CasError):
    """A cache device holds Open CAS metadata (maybe with dirty data)."""

    message = ("%(device)s holds Open CAS metadata (%(detail)s), which may "
               "hold write-back data Ceph does not have yet; it is never "
               "started over with --force. Load it with 'casadm -S -d "
               "%(device)s -l' (or 'os-brick-cas host apply "
               "--load-existing'), flush and stop it if it is to be "
               "re-created, then apply again.")


class VolumeFencedElsewhere(CasError):
    """The fence marker names another host that may hold the newest data."""

    message = ('Volume %(volume)s may still hold write-back data in the '
               'Open CAS cache of host %(fenced)s, so it cannot be attached '
               'on %(host)s. Detach it cleanly on %(fenced)s; only if that '
               'host is lost for good, clear the marker knowingly with '
               "'os-brick-cas fence-clear %(volume)s --host-lost'.")
