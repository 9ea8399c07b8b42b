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

"""How much RAM and metadata a cache instance needs, and how long it drains.

Sources (docs: opencas-cli.md, "Tuning and sizing"): Open CAS's system
requirements guide gives about 1 GiB plus 2.05 % of the cache size at
4 KiB cache lines and 0.175 % at 64 KiB lines. Per cache line that is
83.97 bytes at 4 KiB and 114.69 bytes at 64 KiB; a straight line through
both, ``81.92 + 0.256 * sectors`` bytes per line (512-byte sectors: 8 in a
4 KiB line, 128 in a 64 KiB one; about 2 bits of state per sector), gives
the other line sizes: 1.05 % at 8 KiB, 0.55 % at 16 KiB, 0.30 % at 32 KiB.
The 1 GiB is counted once per host. These are estimates: field reports
are lower (21.2 GiB for 1.84 TiB) and OCF shrank its footprint in 2026;
a running instance's own ``Metadata Memory Footprint`` is the measure.
"""

import math
import os
from typing import Optional

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
#: Open CAS's base RAM, once per host
BASE_RAM_BYTES = GIB
#: the two published points: (line size KiB, fraction of the cache size)
PUBLISHED = ((4, 0.0205), (64, 0.00175))
#: nova's own default reserved_host_memory_mb (nova/conf/compute.py)
NOVA_RESERVED_DEFAULT_MB = 512


def _bytes_per_line(line_kib: int) -> float:
    (low_kib, low_frac), (high_kib, high_frac) = PUBLISHED
    low = low_frac * low_kib * KIB
    high = high_frac * high_kib * KIB
    low_sectors, high_sectors = low_kib * 2, high_kib * 2
    per_sector = (high - low) / (high_sectors - low_sectors)
    return low + per_sector * (line_kib * 2 - low_sectors)


def metadata_fraction(line_kib: int) -> float:
    """Share of the cache size Open CAS keeps as metadata, in RAM."""
    return _bytes_per_line(line_kib) / (line_kib * KIB)


def metadata_bytes(cache_bytes: int, line_kib: int) -> int:
    """RAM (and on-device metadata) of one instance, without the base."""
    return int(math.ceil(cache_bytes * metadata_fraction(line_kib)))


def host_ram_bytes(instance_metadata: list[int]) -> int:
    """RAM Open CAS needs on the host: the base plus every instance."""
    return BASE_RAM_BYTES + sum(instance_metadata)


def reserved_host_memory_mb(ram_bytes: int,
                            nova_default_mb: int = NOVA_RESERVED_DEFAULT_MB
                            ) -> int:
    """What nova's reserved_host_memory_mb should be with Open CAS on it."""
    return nova_default_mb + int(math.ceil(ram_bytes / MIB))


def worst_dirty_bytes(cache_bytes: int, dirty_ratio_pct: Optional[int]
                      ) -> int:
    """The most dirty data an instance may hold.

    With the ALRU dirty-ratio trigger (v25.12+) cleaning starts at that
    share; without it nothing bounds dirty data below the whole cache.
    """
    if dirty_ratio_pct is None:
        return cache_bytes
    return int(cache_bytes * dirty_ratio_pct / 100)


def drain_seconds(dirty_bytes: int, rate_mib_s: float) -> float:
    """Seconds a flush of *dirty_bytes* takes at *rate_mib_s*."""
    return dirty_bytes / (rate_mib_s * MIB)


def meminfo(root: str = '/') -> dict[str, int]:
    """``/proc/meminfo`` under *root*, in bytes (MemTotal, MemAvailable...)."""
    values = {}
    with open(os.path.join(root, 'proc', 'meminfo')) as info:
        for line in info:
            name, _, rest = line.partition(':')
            fields = rest.split()
            if fields and fields[0].isdigit():
                factor = KIB if fields[1:] == ['kB'] else 1
                values[name.strip()] = int(fields[0]) * factor
    return values


def block_device_bytes(device: str, root: str = '/') -> Optional[int]:
    """Size of *device* (a link like /dev/disk/by-id/...) under *root*.

    The link is resolved inside *root* and the size read from
    ``sys/class/block/<name>/size`` (512-byte sectors); None if unknown.
    """
    resolved = os.path.realpath(os.path.join(root, device.lstrip('/')))
    name = os.path.basename(resolved)
    try:
        with open(os.path.join(root, 'sys', 'class', 'block', name,
                               'size')) as size:
            return int(size.read().strip()) * 512
    except (OSError, ValueError):
        return None


def human(size: float) -> str:
    """``1.5 GiB`` style."""
    for unit, factor in (('TiB', 1 << 40), ('GiB', GIB), ('MiB', MIB)):
        if size >= factor:
            return '%.1f %s' % (size / factor, unit)
    return '%.0f KiB' % (size / KIB)


#: IO class ids a cache instance hands to shares and drains (1..32)
SHARE_CLASS_IDS = 32


def share_bytes(cache_bytes: int, line_kib: int, percent: int) -> int:
    """Cache a *percent* share caps a volume at: ceil(percent x lines).

    *cache_bytes* is the cache space (the device less its metadata).
    """
    line = line_kib * KIB
    return math.ceil(percent * (cache_bytes // line) / 100) * line


def share_room(drains: int, shares: list[int]) -> tuple[int, int]:
    """(IO class ids left, percent left) for more shared volumes.

    Drains in flight take ids but no percent; every share takes one id
    and its percent (the caps of all classes sum to at most 100).
    """
    return (max(SHARE_CLASS_IDS - drains - len(shares), 0),
            max(100 - sum(shares), 0))
