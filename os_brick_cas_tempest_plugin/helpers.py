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

"""Logic of the tempest tests that needs no cloud (unit tested).

Nothing here imports tempest or talks to a service: configuration
checks and skip reasons, the shell commands a guest runs to write and
read back a known pattern, and the parsing of ``casadm`` list output on
a compute host. The only project import is the cache-mode vocabulary of
:mod:`os_brick_cas.modes` (an enum, no side effects).
"""

import csv
import dataclasses
import hashlib
import io
import os
import re
import shlex
from typing import Iterable, Mapping, Optional, Sequence

from cinder_ext import extra_specs
from os_brick_cas import modes

ALL_MODES = modes.ALL_MODES
DIRTY_MODES = tuple(mode.value for mode in modes.CacheMode
                    if mode.holds_dirty_data)

# the extra-spec vocabulary cinder_ext validates, from one place
CACHEABLE = extra_specs.CACHEABLE
CACHE_MODE = extra_specs.CACHE_MODE
MULTIATTACH = extra_specs.MULTIATTACH
TRUE = extra_specs.TRUE

#: Run on a compute host. ``--by-id-path`` makes casadm print the
#: /dev/disk/by-id link a core was added with (rbd-<pool>-volume-<id>)
#: instead of the resolved /dev/rbdN, so cores can be matched to volumes.
CASADM_LIST_COMMAND = ('sudo casadm --list-caches --output-format csv '
                       '--by-id-path')
CASADM_LIST_HEADER = ('type', 'id', 'disk', 'status', 'write policy',
                      'device')
CASADM_NO_CACHES = 'No caches running'

GUEST_BLOCK_SIZE = 4096
#: Blocks the pattern is written to: the first one and one 10 MiB in, so a
#: volume of any size (>= 1 GiB) holds both.
PATTERN_BLOCKS = (0, 2560)

_CAS_DEVICE = re.compile(r'^/dev/cas\d+-\d+$')
_TOKEN = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
_GUEST_DISK = re.compile(r'^[a-z][a-z0-9]*$')
_MD5 = re.compile(r'^[0-9a-f]{32}$')


class ConfigurationError(ValueError):
    """tempest.conf [os_brick_cas_tempest] contradicts itself."""


class CasadmOutputError(ValueError):
    """casadm printed something that is not its list CSV."""


class GuestDiskError(ValueError):
    """The attached volume cannot be told apart in the guest."""


# -- modes, volume types and skip reasons ---------------------------------

def holds_dirty_data(mode: str) -> bool:
    """True for modes whose writes may live only on the host SSD."""
    return modes.CacheMode(mode).holds_dirty_data


def volume_type_extra_specs(mode: str) -> dict:
    """Extra specs of a volume type asking for Open CAS *mode*."""
    if mode not in ALL_MODES:
        raise ValueError('unknown Open CAS cache mode %r (known: %s)'
                         % (mode, ', '.join(ALL_MODES)))
    return {CACHEABLE: TRUE, CACHE_MODE: mode}


def feature_skip_reason(enabled: bool) -> Optional[str]:
    """Why no test of the plugin can run, or None."""
    if enabled:
        return None
    return ('os-brick-cas cached volumes are not enabled in the cloud under '
            'test ([os_brick_cas_tempest] enabled = False)')


def mode_skip_reason(enabled: bool, offered_modes: Sequence[str],
                     mode: str) -> Optional[str]:
    """Why a test of cache *mode* cannot run, or None."""
    reason = feature_skip_reason(enabled)
    if reason:
        return reason
    if mode not in ALL_MODES:
        raise ValueError('unknown Open CAS cache mode %r' % mode)
    if mode not in offered_modes:
        return ('Open CAS cache mode %s is not offered by the cloud under '
                'test ([os_brick_cas_tempest] offered_modes = %s)'
                % (mode, ','.join(offered_modes) or '<empty>'))
    return None


def volume_type_for_mode(volume_types: Mapping[str, str],
                         mode: str) -> str:
    """The configured volume type name of an offered *mode*.

    An offered mode without a type name is a configuration error, not a
    reason to skip: the tests would otherwise pass without testing it.
    """
    name = (volume_types.get(mode) or '').strip()
    if not name:
        raise ConfigurationError(
            'Open CAS cache mode %s is offered but [os_brick_cas_tempest] '
            'volume_types names no volume type for it (e.g. '
            'volume_types = %s:cas-%s)' % (mode, mode, mode))
    return name


def host_access_skip_reason(access: bool, ssh_user: Optional[str],
                            ssh_key_file: Optional[str]) -> Optional[str]:
    """Why compute-host checks cannot run, or None.

    Raises ConfigurationError when access is on but incomplete.
    """
    if not access:
        return ('no admin access to the compute hosts '
                '([os_brick_cas_tempest] compute_host_access = False)')
    missing = [name for name, value in (('compute_ssh_user', ssh_user),
                                        ('compute_ssh_key_file',
                                         ssh_key_file))
               if not value]
    if missing:
        raise ConfigurationError(
            '[os_brick_cas_tempest] compute_host_access = True needs %s'
            % ' and '.join(missing))
    return None


def compute_host_address(host: str, addresses: Mapping[str, str]) -> str:
    """Where to ssh for nova compute *host*."""
    return (addresses.get(host) or host).strip()


# -- the pattern a guest writes and reads back ----------------------------

def _md5(data: bytes) -> str:
    # a checksum of test data, not a security measure
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


_EMPTY_MD5 = _md5(b'')


@dataclasses.dataclass(frozen=True)
class PatternMismatch:
    """One block of the pattern that did not read back."""

    block: int
    expected: str
    actual: Optional[str]

    def __str__(self) -> str:
        if self.actual is None:
            got = 'no checksum'
        elif self.actual == _EMPTY_MD5:
            got = 'nothing (the read returned no data)'
        else:
            got = self.actual
        return ('block %d (offset %d): expected md5 %s, read %s'
                % (self.block, self.block * GUEST_BLOCK_SIZE,
                   self.expected, got))


@dataclasses.dataclass(frozen=True)
class GuestPattern:
    """A known pattern, unique to *token*, at PATTERN_BLOCKS of a disk.

    Every block names the token and its own position, so data of another
    volume, another test or another block never reads back as a match.
    """

    token: str
    blocks: tuple = PATTERN_BLOCKS

    def __post_init__(self):
        if not _TOKEN.match(self.token):
            raise ValueError('pattern token %r must be 1-64 letters, '
                             'digits, ".", "_" or "-"' % self.token)
        if not self.blocks or any(not isinstance(b, int) or b < 0
                                  for b in self.blocks):
            raise ValueError('pattern blocks must be non-negative ints')

    def block_data(self, block: int) -> bytes:
        """The GUEST_BLOCK_SIZE bytes written at *block* (printable)."""
        line = 'os-brick-cas:%s:block-%d;' % (self.token, block)
        repeated = line * (GUEST_BLOCK_SIZE // len(line) + 1)
        return repeated[:GUEST_BLOCK_SIZE].encode('ascii')

    def expected_checksums(self) -> list:
        return [_md5(self.block_data(block)) for block in self.blocks]

    def write_command(self, device: str, sudo: bool = True) -> str:
        """Shell command writing the pattern to *device*, then syncing."""
        device = shlex.quote(_checked_path(device))
        prefix = 'sudo ' if sudo else ''
        steps = ["printf '%%s' %s | %sdd of=%s bs=%d seek=%d "
                 'conv=notrunc,fsync'
                 % (shlex.quote(self.block_data(block).decode('ascii')),
                    prefix, device, GUEST_BLOCK_SIZE, block)
                 for block in self.blocks]
        return ' && '.join(steps + ['sync'])

    def read_command(self, device: str, sudo: bool = True) -> str:
        """Shell command printing one md5sum line per pattern block."""
        device = shlex.quote(_checked_path(device))
        prefix = 'sudo ' if sudo else ''
        return ' && '.join(
            '%sdd if=%s bs=%d skip=%d count=1 | md5sum'
            % (prefix, device, GUEST_BLOCK_SIZE, block)
            for block in self.blocks)

    def mismatches(self, read_output: str) -> list:
        """Compare read_command output with the pattern ([] if equal)."""
        actual = []
        for line in read_output.splitlines():
            fields = line.split()
            if fields and _MD5.match(fields[0]):
                actual.append(fields[0])
        found = []
        for index, (block, expected) in enumerate(
                zip(self.blocks, self.expected_checksums())):
            got = actual[index] if index < len(actual) else None
            if got != expected:
                found.append(PatternMismatch(block, expected, got))
        return found


def drop_caches_command() -> str:
    """Guest command emptying its page cache, so reads hit the disk.

    Needed after live migration, where the guest's memory (and its page
    cache of the volume) moves with it.
    """
    return "sudo sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"


def new_guest_disk(before: Iterable[str], after: Iterable[str]) -> str:
    """The /dev path of the one disk in *after* that is not in *before*.

    Both are disk names as the guest lists them (e.g. ``vda``).
    """
    before = set(before)
    new = sorted(set(after) - before)
    if len(new) != 1:
        raise GuestDiskError(
            'expected exactly one new disk in the guest after attach, '
            'found %s (before: %s)' % (new or 'none', sorted(before)))
    if not _GUEST_DISK.match(new[0]):
        raise GuestDiskError('unexpected guest disk name %r' % new[0])
    return '/dev/' + new[0]


def _checked_path(device: str) -> str:
    if not device.startswith('/') or any(c.isspace() for c in device):
        raise ValueError('device %r must be an absolute path without '
                         'spaces' % device)
    return device


# -- casadm on the compute host --------------------------------------------

@dataclasses.dataclass(frozen=True)
class CasCore:
    """One core row of ``casadm --list-caches --output-format csv``.

    cache_id and cache_mode are those of the cache row above it; both are
    None for a device in the core pool (detached from any cache).
    """

    cache_id: Optional[int]
    cache_mode: Optional[str]
    core_id: Optional[int]
    disk: str
    status: str
    device: Optional[str]

    @property
    def in_core_pool(self) -> bool:
        return self.cache_id is None


def _dash_none(value: str) -> Optional[str]:
    return None if value == '-' else value


def _int_or_none(value: str, row: int) -> Optional[int]:
    if value == '-':
        return None
    try:
        return int(value)
    except ValueError:
        raise CasadmOutputError('line %d: id %r is not a number'
                                % (row, value))


def parse_casadm_list(text: str) -> list:
    """Every core (in a cache or in the core pool) listed in *text*."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or (len(lines) == 1 and
                     lines[0].strip() == CASADM_NO_CACHES):
        return []
    rows = list(csv.reader(io.StringIO('\n'.join(lines))))
    if tuple(column.strip() for column in rows[0]) != CASADM_LIST_HEADER:
        raise CasadmOutputError(
            'unexpected casadm list header %r (expected %r; was it run '
            'with --output-format csv?)' % (lines[0],
                                            ','.join(CASADM_LIST_HEADER)))
    cores = []
    cache_id = cache_mode = None
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(CASADM_LIST_HEADER):
            raise CasadmOutputError('line %d has %d columns, expected %d: '
                                    '%r' % (number, len(row),
                                            len(CASADM_LIST_HEADER), row))
        kind, ident, disk, status, policy, device = (
            value.strip() for value in row)
        if kind == 'core pool':
            cache_id = cache_mode = None
        elif kind == 'cache':
            cache_id = _int_or_none(ident, number)
            cache_mode = _dash_none(policy)
        elif kind == 'core':
            cores.append(CasCore(cache_id, cache_mode,
                                 _int_or_none(ident, number), disk, status,
                                 _dash_none(device)))
        else:
            raise CasadmOutputError('line %d: unknown row type %r'
                                    % (number, kind))
    return cores


def cores_for_volume(cores: Iterable[CasCore], volume_id: str) -> list:
    """Cores whose by-id disk names the RBD image of *volume_id*.

    The link is ``/dev/disk/by-id/rbd-<pool>-<image>``; the whole image
    name is compared, so one volume id never matches another's.
    """
    image = 'volume-%s' % volume_id
    return [core for core in cores
            if os.path.basename(core.disk).startswith('rbd-') and
            os.path.basename(core.disk).endswith('-' + image)]


def is_cas_device(path: Optional[str]) -> bool:
    """True for an Open CAS exported object path, /dev/casI-J."""
    return bool(path and _CAS_DEVICE.match(path))
