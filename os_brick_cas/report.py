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

"""What the host's Open CAS caches hold, from casadm's CSV output.

Shared by ``os-brick-cas status``, ``doctor`` and ``flush``: one list of
cache instances with their statistics and, for each core, the Cinder
volume behind it (read from the core's by-id name) and the processes that
hold its exported device open.
"""

import dataclasses
import re
from typing import Optional

from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas import labels
from os_brick_cas.opencas import casadm_output
from os_brick_cas import openers
from os_brick_cas import ownership
from os_brick_cas import rbd_names
from os_brick_cas import share_usage
from os_brick_cas import validation

LOG = logging.getLogger(__name__)

_BY_ID_RBD = re.compile(r'rbd-(?P<rest>.+)')
_UUID = (r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
         r'[0-9a-f]{12}')
_CINDER_VOLUME = re.compile(r'volume-(?P<volume_id>%s)' % _UUID)
_CINDER_IMAGE = re.compile(
    r'(?P<pool>.+)-(?P<image>volume-(?P<volume_id>%s))' % _UUID)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a host command did: *done* (else refused) and what to say."""

    done: bool
    message: str


@dataclasses.dataclass
class CoreReport:
    cache_id: int
    core_id: int
    core_device: str
    exported: Optional[str]
    status: str
    volume_id: Optional[str]
    rbd_image: Optional[str]
    rbd_device: Optional[str]
    dirty_blocks: Optional[int]
    occupancy_blocks: Optional[int]
    read_hit_ratio: Optional[float]
    write_hit_ratio: Optional[float]
    #: the Cinder attachment whose data the core caches (ownership record)
    attachment: Optional[str] = None
    #: pinned to a no-allocation IO class: cannot get dirty (drain)
    drained: bool = False
    #: processes holding ``exported`` open (e.g. a QEMU whose hot-unplug
    #: never completed): while any does, the core cannot be removed
    held_by: list[str] = dataclasses.field(default_factory=list)
    #: the cache share (whole percent) the volume asked for, and holds now
    #: (None: none; a share asked and not held was lost to the IO-class
    #: budget unless the core is drained)
    share_asked: Optional[int] = None
    share_held: Optional[int] = None
    #: its IO class's occupancy and dirty blocks against its cap (4 KiB
    #: blocks), while it holds a share
    share_occupancy_blocks: Optional[int] = None
    share_dirty_blocks: Optional[int] = None
    share_cap_blocks: Optional[int] = None

    @property
    def label(self) -> str:
        """``core 3 of cache instance 1`` (:func:`labels.core`)."""
        return labels.core(self.cache_id, self.core_id)

    @property
    def core(self) -> casadm_output.Core:
        """The casadm core this report describes."""
        return casadm_output.Core(cache_id=self.cache_id, core_id=self.core_id,
                                  device=self.core_device, status=self.status,
                                  exported=self.exported)


@dataclasses.dataclass
class CacheReport:
    cache_id: int
    mode: str
    status: str
    device: str
    configured_mode: Optional[str]
    occupancy_blocks: Optional[int]
    occupancy_percent: Optional[float]
    dirty_blocks: Optional[int]
    read_hit_ratio: Optional[float]
    cores: list[CoreReport]


def rbd_image_of(core_device: str) -> tuple[Optional[str], Optional[str]]:
    """``(pool/[namespace/]image, volume id)`` of a by-id core path, if ours.

    ``rbd-cas-…`` names identify the image exactly; the 1.x name
    ``rbd-<pool>-<image>`` only splits with certainty for Cinder's
    ``volume-<uuid>`` images.
    """
    if not core_device.startswith(validation.BY_ID_DIR + '/'):
        return None, None
    name = core_device.rsplit('/', 1)[-1]
    spec = rbd_names.parse_link_name(name)
    if spec is not None:
        cinder = _CINDER_VOLUME.fullmatch(spec.image)
        return spec.path, cinder.group('volume_id') if cinder else None
    match = _BY_ID_RBD.fullmatch(name)
    if not match:
        return None, None
    cinder = _CINDER_IMAGE.fullmatch(match.group('rest'))
    if cinder:
        return ('%s/%s' % (cinder.group('pool'), cinder.group('image')),
                cinder.group('volume_id'))
    return None, None


def percent(ratio: Optional[float]) -> str:
    """A 0..1 ratio as '12.3%', '-' when unknown."""
    return '-' if ratio is None else '%.1f%%' % (100 * ratio)


def _number(stats: dict[str, str], title: str) -> Optional[float]:
    raw = stats.get(title)
    if raw in (None, '', '-'):
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def _int(stats: dict[str, str], title: str) -> Optional[int]:
    value = _number(stats, title)
    return None if value is None else int(value)


def requests_of(stats: dict[str, str], kind: str
                ) -> Optional[tuple[float, float]]:
    """(hits, every request) of *kind* ('Read' or 'Write'), or None.

    casadm's "<kind> total" leaves out the requests it passed through
    (sequential cut-off, a pass-through IO class, promotion refusals):
    they reached Ceph, so they count as requests the cache did not serve.
    """
    hits = _number(stats, '%s hits [Requests]' % kind)
    total = _number(stats, '%s total [Requests]' % kind)
    if hits is None or total is None:
        return None
    passed = _number(stats, 'Pass-Through %ss [Requests]' % kind.lower())
    return hits, total + (passed or 0)


def hit_ratio(stats: dict[str, str], kind: str) -> Optional[float]:
    """Hits / every request of *kind* ('Read' or 'Write'), 0..1."""
    counted = requests_of(stats, kind)
    if counted is None or not counted[1]:
        return None
    return counted[0] / counted[1]


def _stats(casadm: casadm_mod.Casadm, cache_id: int,
           core_id: Optional[int] = None) -> dict[str, str]:
    try:
        return casadm.stats(cache_id, core_id)
    except exception.CasModuleNotLoaded:
        raise
    except exception.CasError:
        return {}


def _rbd_device(rbd_image: Optional[str]) -> Optional[str]:
    return '/dev/rbd/%s' % rbd_image if rbd_image else None


def core_report(casadm: casadm_mod.Casadm,
                core: casadm_output.Core) -> CoreReport:
    stats = _stats(casadm, core.cache_id, core.core_id)
    rbd_image, volume_id = rbd_image_of(core.device)
    return CoreReport(
        cache_id=core.cache_id, core_id=core.core_id,
        core_device=core.device, exported=core.exported,
        status=core.status, volume_id=volume_id, rbd_image=rbd_image,
        rbd_device=_rbd_device(rbd_image),
        dirty_blocks=_int(stats, casadm_output.DIRTY_BLOCKS),
        occupancy_blocks=_int(stats, 'Occupancy [4KiB Blocks]'),
        read_hit_ratio=hit_ratio(stats, 'Read'),
        write_hit_ratio=hit_ratio(stats, 'Write'),
        attachment=attachment_of(core.device))


def attachment_of(core_device: str) -> Optional[str]:
    """The attachment (epoch) owning the core added as *core_device*."""
    try:
        record = ownership.read(core_device)
    except exception.InvalidInput:
        return None     # not a link os-brick-cas manages
    return record.epoch if record else None


def host_report(casadm: casadm_mod.Casadm,
                configured: Optional[dict[int, str]] = None
                ) -> list[CacheReport]:
    """Every cache instance on the host with its cores and statistics.

    *configured* maps cache id -> mode from ``[os_brick_cas]
    cache_instances``, to show which instances this host offers.
    """
    configured = configured or {}
    reports = []
    caches = casadm.list_caches()
    held = holders(caches)
    for cache in caches:
        stats = _stats(casadm, cache.cache_id)
        table = _table(casadm, cache)
        drained = _drained(cache, table)
        shares = _shares(casadm, cache, stats, table)
        reports.append(CacheReport(
            cache_id=cache.cache_id, mode=cache.mode, status=cache.status,
            device=cache.device,
            configured_mode=configured.get(cache.cache_id),
            occupancy_blocks=_int(stats, 'Occupancy [4KiB Blocks]'),
            occupancy_percent=_number(stats, 'Occupancy [%]'),
            dirty_blocks=_int(stats, casadm_output.DIRTY_BLOCKS),
            read_hit_ratio=hit_ratio(stats, 'Read'),
            cores=[_with_state(core_report(casadm, core), drained,
                               held.get(core.exported or '', []),
                               shares.get(core.core_id))
                   for core in cache.cores]))
    return reports


def holders(caches: list[casadm_output.CacheInstance]
            ) -> dict[str, list[openers.Opener]]:
    """The processes holding each core's exported device open, by device.

    What status shows under a core and doctor's ``holders`` check says:
    while any holds it, the core cannot be removed.
    """
    return openers.openers(core.exported for cache in caches
                           for core in cache.cores if core.exported)


def _with_state(core: CoreReport, drained: set[int],
                openers_of_core: list[openers.Opener],
                share: Optional[share_usage.CoreShare] = None
                ) -> CoreReport:
    core = dataclasses.replace(
        core, drained=core.core_id in drained,
        held_by=[str(opener) for opener in openers_of_core])
    if share is None:
        return core
    return dataclasses.replace(
        core, share_asked=share.asked, share_held=share.held,
        share_occupancy_blocks=share.occupancy_blocks,
        share_dirty_blocks=share.dirty_blocks,
        share_cap_blocks=share.cap_blocks)


def _table(casadm: casadm_mod.Casadm, cache: casadm_output.CacheInstance
           ) -> Optional[list[casadm_output.IoClass]]:
    """The instance's IO-class table (None without cores, or unreadable)."""
    if not cache.cores:
        return None
    try:
        return casadm.list_io_classes(cache.cache_id)
    except exception.CasError as exc:
        LOG.warning('Cannot read the IO classes of instance %(cache)s: '
                    '%(err)s', {'cache': cache.cache_id, 'err': exc})
        return None


def _drained(cache: casadm_output.CacheInstance,
             table: Optional[list[casadm_output.IoClass]]) -> set[int]:
    """Drained core ids of a write-back/write-only instance (else none)."""
    if cache.current_mode not in ('wb', 'wo') or table is None:
        return set()
    return drain.drained_cores(table)


def _shares(casadm: casadm_mod.Casadm, cache: casadm_output.CacheInstance,
            stats: dict[str, str],
            table: Optional[list[casadm_output.IoClass]]
            ) -> dict[int, share_usage.CoreShare]:
    """Each core's share (none when the table or its stats are unread)."""
    if table is None:
        return {}
    try:
        return share_usage.instance_shares(casadm, cache, stats,
                                           table).cores
    except exception.CasError as exc:
        LOG.warning('Cannot read the IO-class statistics of instance '
                    '%(cache)s: %(err)s', {'cache': cache.cache_id,
                                           'err': exc})
        return {}


def names_volume(core_device: str, volume: str) -> bool:
    """Whether the core on *core_device* caches *volume* (operator's name).

    An operator names a volume by its Cinder id or as
    ``pool/[namespace/]image``. The one lookup by such a name (flush,
    drain, recover, discard); attach and detach find a core by the image's
    identity instead
    (:meth:`os_brick_cas.connector.CachedRBDConnector._core_of`).
    """
    return _is_named(volume, *rbd_image_of(core_device))


def _is_named(volume: str, rbd_image: Optional[str],
              volume_id: Optional[str]) -> bool:
    return bool(volume) and volume in (rbd_image, volume_id)


def find_volume_core(reports: list[CacheReport],
                     volume: str) -> Optional[CoreReport]:
    """The core of *volume* (Cinder volume id or pool/image), if cached."""
    for cache in reports:
        for core in cache.cores:
            # the report parsed each core's link once already
            if _is_named(volume, core.rbd_image, core.volume_id):
                return core
    return None
