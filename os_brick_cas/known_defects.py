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

"""Open CAS defects, known to os-brick-cas, that lose acknowledged writes.

A cache mode whose writes such a defect can lose is not offered on a host
whose loaded Open CAS module has it (:mod:`os_brick_cas.policy` treats
the instance as unusable for that mode, so the fallback policy decides,
doctor fails and nova reports no trait for it) unless the operator names
the defect in ``[os_brick_cas] accepted_data_loss_defects``. Cores that
already exist are never stranded: re-attach, flush and detach go on.

The release is read from ``/sys/module/cas_cache/version`` (MODULE_VERSION
of the loaded module; no root, no casadm call).
"""

import dataclasses
import os
from typing import Optional

from oslo_config import cfg

from os_brick_cas import modes
from os_brick_cas import opts
from os_brick_cas import releases

VERSION_FILE = 'sys/module/cas_cache/version'


@dataclasses.dataclass(frozen=True)
class Defect:
    """One defect: the release lines it is in and the modes it can hurt."""

    key: str
    introduced: tuple[int, int]
    fixed: Optional[tuple[int, int]]
    modes: tuple[modes.CacheMode, ...]
    summary: str

    def affects(self, release: Optional[tuple[int, int]]) -> bool:
        return release is not None and release >= self.introduced and (
            self.fixed is None or release < self.fixed)


DEFECTS = (
    Defect(
        key='ocf-hit-invalid-backfill',
        introduced=(26, 3),
        fixed=None,
        modes=(modes.CacheMode.WRITE_BACK, modes.CacheMode.WRITE_ONLY),
        summary='a read of lines whose first write-back write is in flight '
                'backfills the old data from Ceph over them and leaves them '
                'dirty, so the flush writes the old data back over the '
                "acknowledged write (LOOKUP_HIT_INVALID is not re-checked "
                "after the read's lock wait; reproduced on v26.03.2 by "
                'tests/kernel/test_reader_race.py with a guest-like O_DIRECT '
                'reader; v24.9 lost nothing in the same runs; no fixed '
                'release known)'),
)


def loaded_version(conf: cfg.ConfigOpts = cfg.CONF) -> Optional[str]:
    """The loaded cas_cache module's version, None if it is not loaded."""
    path = os.path.join(conf[opts.GROUP].host_root, VERSION_FILE)
    try:
        with open(path) as version_file:
            return version_file.read().strip() or None
    except OSError:
        return None


def unaccepted(mode: modes.CacheMode, version: Optional[str],
               conf: cfg.ConfigOpts = cfg.CONF) -> list[Defect]:
    """Defects of *version* that can lose *mode*'s writes, not accepted."""
    if version is None:
        return []
    release = releases.major_minor(version)
    accepted = set(conf[opts.GROUP].accepted_data_loss_defects)
    return [defect for defect in DEFECTS
            if mode in defect.modes and defect.affects(release) and
            defect.key not in accepted]
