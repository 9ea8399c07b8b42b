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

"""Each cached volume's cache share as the operator sees it.

What the volume asked for (:mod:`os_brick_cas.share_asks`), what its core
holds in the loaded IO-class table, and its class's occupancy and dirty
blocks against its cap, read from casadm's IO-class statistics (one
``casadm -P -i I -d`` per instance). Shared by ``status``, ``doctor`` and
the exporter.
"""

import dataclasses
import math
from typing import Optional

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import io_class_table
from os_brick_cas.opencas import casadm_output
from os_brick_cas import share_asks

#: casadm counts usage in 4 KiB blocks
BLOCK_KIB = 4


@dataclasses.dataclass(frozen=True)
class CoreShare:
    """One core's share: asked, held, and its use against the cap."""

    core_id: int
    #: whole percent the volume's type asks for (None: no share)
    asked: Optional[int]
    #: whole percent its class has now (None: no class, or drained)
    held: Optional[int]
    drained: bool = False
    #: its class's blocks (only while it holds a share)
    occupancy_blocks: Optional[int] = None
    dirty_blocks: Optional[int] = None
    #: the cap, ceil(share x cache lines / 100), in 4 KiB blocks
    cap_blocks: Optional[int] = None
    #: reads of its class that bypassed the cache (over the cap, or
    #: sequential cut-off); Open CAS counts no evictions per class
    pass_through_reads: Optional[int] = None

    @property
    def lost(self) -> bool:
        """Asked for a share, holds none, and not because of a drain."""
        return self.asked is not None and self.held is None and \
            not self.drained


@dataclasses.dataclass(frozen=True)
class InstanceShares:
    """The shares of one instance and the table they should give."""

    cache_id: int
    cores: dict[int, CoreShare]
    table: list[casadm_output.IoClass]
    #: what :func:`io_class_table.expected` composes for the cores now
    expected: io_class_table.Composed

    @property
    def table_differs(self) -> bool:
        return self.expected.table != self.table


def cap_blocks(percent: int, cache_blocks: int, line_kib: int) -> int:
    """A class's cap in 4 KiB blocks: ceil(percent x lines / 100) lines."""
    line_blocks = max(line_kib // BLOCK_KIB, 1)
    lines = cache_blocks // line_blocks
    return math.ceil(percent * lines / 100) * line_blocks


def asked_shares(cache: casadm_output.CacheInstance) -> dict[int, int]:
    """core id -> the share its volume asked for (its record)."""
    found = {}
    for core in cache.cores:
        share = share_asks.asked(cache.cache_id, core.core_id, core.device)
        if share is not None:
            found[core.core_id] = share
    return found


def instance_shares(casadm: casadm_mod.Casadm,
                    cache: casadm_output.CacheInstance,
                    cache_stats: dict[str, str],
                    table: Optional[list[casadm_output.IoClass]] = None
                    ) -> InstanceShares:
    """The shares of *cache*'s cores (CasError if casadm fails).

    *cache_stats* is the instance's ``-P`` (its size and line size).
    ``-P -d`` runs only when some class holds a share.
    """
    if table is None:
        table = casadm.list_io_classes(cache.cache_id)
    asked = asked_shares(cache)
    entries = {entry.core_id: entry
               for entry in io_class_table.entries(table)}
    held = {core.core_id: io_class_table.share_of(table, core.core_id)
            for core in cache.cores}
    usage = {}
    if any(share is not None for share in held.values()):
        by_class = {row.class_id: row
                    for row in casadm.io_class_stats(cache.cache_id)}
        for io_class in table:
            core_id = _core_of(io_class)
            if core_id is not None and io_class.class_id in by_class:
                usage[core_id] = by_class[io_class.class_id]
    size = _int(cache_stats, 'Cache Size [4KiB Blocks]')
    line_kib = _int(cache_stats, 'Cache line size [KiB]') or BLOCK_KIB
    cores = {}
    for core in cache.cores:
        entry = entries.get(core.core_id)
        drained = bool(entry and entry.drained)
        remembered = entry.share if entry else None
        share = held[core.core_id]
        row = usage.get(core.core_id) if share is not None else None
        cores[core.core_id] = CoreShare(
            core_id=core.core_id,
            asked=asked.get(core.core_id, remembered),
            held=share, drained=drained,
            occupancy_blocks=row.occupancy_blocks if row else None,
            dirty_blocks=row.dirty_blocks if row else None,
            cap_blocks=(cap_blocks(share, size, line_kib)
                        if share is not None and size else None),
            pass_through_reads=row.pass_through_reads if row else None)
    return InstanceShares(
        cache.cache_id, cores, table,
        io_class_table.expected(table, asked,
                                (core.core_id for core in cache.cores)))


def _core_of(io_class: casadm_output.IoClass) -> Optional[int]:
    found = io_class_table.entries([io_class])
    return found[0].core_id if found else None


def _int(stats: dict[str, str], title: str) -> Optional[int]:
    try:
        return int(float(stats.get(title, '')))
    except ValueError:
        return None
