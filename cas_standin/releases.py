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

"""What differs between the Open CAS releases the stand-in emulates.

The host's version knob (``SimulatedHostControl.set_version``) picks one.
Facts from the release sources (casadm/statistics_model.c, cas_lib.c,
cas_main.c, extended_err_msg.c of v24.9, v25.12.2 and v26.03.2) and from
the v26.03.2 real-kernel trial (tests/data/real-casadm/v26.03.2):

* ``Read deferred`` / ``Write deferred`` request rows: v26.03 on.
* Prefetch and cleaner columns (``Prefetch Policy``, ``Prefetch:
  readahead``, ``Cleaner``, ``User requests`` and four block rows): only
  open-cas-linux master (a version string containing "master").
* ``-G -n cleaning-alru`` dirty-ratio rows: v25.12 on.
* "Old metadata found": v24.9 prints the advice inside the extended error
  message (with its trailing newline, so a blank line follows); later
  releases print it from start_cache.
* An IO-class file naming class 0 other than ``unclassified``: from v25.12
  casadm refuses it while parsing (cas_lib.c); v24.9's casadm passes it on
  and the kernel refuses it, "Invalid input parameter", table unchanged
  (recorded: tests/data/real-casadm/v24.9/io-class-*-class0-renamed).
"""

import dataclasses
from typing import Optional

#: what ``casadm -V`` reports when no release is asked for
DEFAULT_VERSION = '26.03.2.0000.release'
OLD_METADATA_ADVICE = ('Please load cache metadata using --load option or '
                       'use --force to\n discard on-disk metadata and start '
                       'fresh cache instance.\n')


@dataclasses.dataclass(frozen=True)
class Release:
    """The per-release behaviour of casadm that the stand-in emulates."""

    name: str
    deferred_rows: bool
    prefetch_columns: bool
    alru_dirty_ratio: bool
    old_metadata: str
    #: casadm itself refuses a class 0 not named ``unclassified``
    class_0_name_parsed: bool = True


V24_9 = Release('24.9', deferred_rows=False, prefetch_columns=False,
                alru_dirty_ratio=False,
                old_metadata='Old metadata found on device.\n' +
                OLD_METADATA_ADVICE + '\n', class_0_name_parsed=False)
V25_12 = Release('25.12', deferred_rows=False, prefetch_columns=False,
                 alru_dirty_ratio=True,
                 old_metadata='Old metadata found on device\n' +
                 OLD_METADATA_ADVICE)
V26_03 = dataclasses.replace(V25_12, name='26.03', deferred_rows=True)
MASTER = dataclasses.replace(V26_03, name='master', prefetch_columns=True)


def version_tuple(version: Optional[str]) -> tuple[int, int]:
    """``(24, 9)`` from ``24.09.0.0000.release`` (None: the default)."""
    major, minor = (version or DEFAULT_VERSION).split('.')[:2]
    return int(major), int(minor)


def of(version: Optional[str]) -> Release:
    """The release a ``casadm -V`` version string belongs to.

    Releases before v24.9 are emulated as v24.9 here (their only other
    difference the stand-in knows, ``-E``, is handled by casadm.py).
    """
    if version and 'master' in version:
        return MASTER
    found = version_tuple(version)
    if found >= (26, 3):
        return V26_03
    if found >= (25, 12):
        return V25_12
    return V24_9
