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

"""Pure helpers of the scenario tests (unit tested without a cloud)."""

import hashlib
import shlex
from typing import Any, Optional

from os_brick_cas import casadm

MODES = ('wt', 'wb', 'wa', 'wo', 'pt')
DIRTY_MODES = ('wb', 'wo')
PATTERN_BYTES = 64 * 1024


def skip_reason(group: Any, mode: Optional[str] = None) -> Optional[str]:
    """Why a test (of *mode*) cannot run with this configuration."""
    if not group.enabled:
        return 'os-brick-cas tests are disabled ([os_brick_cas_tempest] ' \
               'enabled = False)'
    if mode is not None:
        if mode not in group.offered_modes:
            return 'cache mode %s is not offered ([os_brick_cas_tempest] ' \
                   'offered_modes = %s)' % (mode,
                                            ','.join(group.offered_modes))
        if not group.volume_types.get(mode):
            return 'no volume type configured for mode %s ' \
                   '([os_brick_cas_tempest] volume_types)' % mode
    return None


def pattern(label: str) -> bytes:
    """PATTERN_BYTES of text unique to *label*."""
    unit = ('os-brick-cas tempest %s\n' % label).encode()
    return (unit * (PATTERN_BYTES // len(unit) + 1))[:PATTERN_BYTES]


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def write_pattern_command(device: str, label: str) -> str:
    """Guest shell command writing pattern(label) to the start of device."""
    unit = 'os-brick-cas tempest %s' % label
    count = PATTERN_BYTES // (len(unit) + 1) + 1
    return ('i=0; while [ $i -lt %d ]; do echo %s; i=$((i+1)); done | '
            'head -c %d | sudo dd of=%s bs=4096 conv=fsync 2>/dev/null; '
            'sync' % (count, shlex.quote(unit), PATTERN_BYTES,
                      shlex.quote(device)))


def read_md5_command(device: str) -> str:
    """Guest shell command printing the md5 of the pattern area."""
    return ('sudo dd if=%s bs=4096 count=%d 2>/dev/null | md5sum | '
            "cut -d' ' -f1" % (shlex.quote(device), PATTERN_BYTES // 4096))


def cas_core_of_volume(casadm_csv: str, volume_id: str
                       ) -> Optional[casadm.Core]:
    """The Open CAS core caching *volume_id* in ``casadm -L -o csv``."""
    suffix = 'volume-%s' % volume_id
    for cache in casadm.parse_list(casadm_csv):
        for core in cache.cores:
            if core.device.endswith(suffix):
                return core
    return None


def volume_type_specs(mode: str) -> dict[str, str]:
    """Extra specs of a volume type for *mode*."""
    return {'cacheable': '<is> True', 'cas:cache_mode': mode}
