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

"""Observation of the host: a volume's core and the state it shows.

The one way to find a volume's core (:func:`locate`, by the identifying
link the core was added as) and to read its stable state from a fresh
listing and the IO-class table.
"""

import dataclasses
import os
from typing import Optional

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas.lifecycle import journal
from os_brick_cas.lifecycle.states import ABSENT
from os_brick_cas.lifecycle.states import CACHING
from os_brick_cas.lifecycle.states import DRAINED
from os_brick_cas.lifecycle.states import IN_FLIGHT
from os_brick_cas.lifecycle.states import INACTIVE
from os_brick_cas.opencas import casadm_output
from os_brick_cas import ownership
from os_brick_cas import rbd_names


@dataclasses.dataclass(frozen=True)
class Located:
    """A volume's core on this host as a fresh listing shows it."""

    cache: casadm_output.CacheInstance
    core: casadm_output.Core

    @property
    def epoch(self) -> Optional[str]:
        record = ownership.read(self.core.device)
        return record.epoch if record else None


def locate(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec,
           caches: Optional[list[casadm_output.CacheInstance]] = None
           ) -> Optional[Located]:
    """The core whose identifying link names *spec* (casadm now).

    *caches*: a listing the caller just read, instead of casadm's.
    """
    for cache in (casadm.list_caches() if caches is None else caches):
        for core in cache.cores:
            named = rbd_names.parse_link_name(os.path.basename(core.device))
            if named is not None and named.same_image(spec):
                return Located(cache, core)
    return None


def host_state(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec
               ) -> str:
    """The state the host itself shows (the journal aside)."""
    return state_of(casadm, locate(casadm, spec))


def state_of(casadm: casadm_mod.Casadm, found: Optional[Located]) -> str:
    """The state of the core *found* (None: no core) as the host shows it."""
    if found is None:
        return ABSENT
    if not found.core.active:
        return INACTIVE
    drained = drain_mod.drained_cores(
        casadm.list_io_classes(found.cache.cache_id))
    return DRAINED if found.core.core_id in drained else CACHING


def state(casadm: casadm_mod.Casadm, spec: rbd_names.ImageSpec) -> str:
    """The volume's state: an in-flight journal record wins."""
    record = journal.read(spec)
    if record and record.state in IN_FLIGHT:
        return record.state
    return host_state(casadm, spec)


def not_drained_reason(casadm: casadm_mod.Casadm,
                       spec: rbd_names.ImageSpec,
                       caches: Optional[list[casadm_output.CacheInstance]]
                       = None,
                       tables: Optional[dict[int, list[casadm_output.IoClass]]]
                       = None) -> Optional[str]:
    """Why a fresh listing does not show the volume drained, or None.

    Drained = core active, its drain class loaded, 0 dirty blocks.
    *caches* and *tables* (IO-class tables by instance): a listing the
    caller just read, instead of asking casadm again.
    """
    found = locate(casadm, spec, caches)
    if found is None:
        return 'it has no core on this host'
    if not found.core.active:
        return 'its %s is inactive' % found.core.label
    table = (tables or {}).get(found.cache.cache_id)
    if table is None:
        table = casadm.list_io_classes(found.cache.cache_id)
    if found.core.core_id not in drain_mod.drained_cores(table):
        return ('the IO-class table does not drain %s (loaded by someone '
                'else?)' % found.core.label)
    dirty = casadm.dirty_blocks(found.core)
    if dirty:
        return '%s still holds %d dirty blocks' % (found.core.label, dirty)
    return None
