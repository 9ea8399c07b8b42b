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

"""Drift: each core whose real state differs from what is recorded.

Read by doctor's "life cycle" check and the exporter's drift metric. A
comparison that could not be made is reported as such (UNCHECKED), never
as a match.
"""

import dataclasses
import os
from typing import Optional

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas import io_class_table
from os_brick_cas.lifecycle import host
from os_brick_cas.lifecycle import journal
from os_brick_cas.lifecycle import states
from os_brick_cas.lifecycle.states import DRAINED
from os_brick_cas.lifecycle.states import RELEASING
from os_brick_cas.lifecycle.transitions import Cinder
from os_brick_cas.lifecycle.transitions import volume_id_of
from os_brick_cas.opencas import casadm_output
from os_brick_cas import rbd_names

#: Drift kinds that are not a difference but a comparison not made
UNCHECKED = 'unchecked'
#: a journal file that is not a valid record (moved into the quarantine)
QUARANTINE = 'quarantine'


@dataclasses.dataclass(frozen=True)
class Drift:
    """A core whose real state differs from its record.

    Kind UNCHECKED: a comparison that could not be made (casadm or Cinder
    did not answer), with the reason; never to be read as "matches".
    """

    volume: str
    problem: str
    action: str
    #: 'table', 'gone-class', 'inactive', 'marker', 'held', 'journal',
    #: 'quarantine' or 'unchecked'
    kind: str = 'table'


def drift(casadm: casadm_mod.Casadm, cinder: Optional[Cinder] = None,
          caches: Optional[list[casadm_output.CacheInstance]] = None,
          tables: Optional[dict[int, list[casadm_output.IoClass]]] = None
          ) -> list[Drift]:
    """Each core whose real state differs from what is recorded.

    Hand-loaded IO-class rules, drain classes of cores that do not exist,
    inactive cores, unfinished transitions, drains nova holds (journal)
    that the host does not hold, journal files quarantined as invalid,
    and (with *cinder*) a marker that says "drained" for a core that is
    not. A comparison that could not be made is an UNCHECKED entry with
    the reason, never left out. *caches* and *tables* (IO-class tables by
    instance): a listing the caller already has (the exporter's scrape);
    what is missing is asked of casadm.
    """
    found: list[Drift] = []
    if caches is None:
        caches = casadm.list_caches()
    tables = dict(tables or {})
    for cache in caches:
        if cache.cache_id not in tables:
            try:
                tables[cache.cache_id] = casadm.list_io_classes(
                    cache.cache_id)
            except exception.CasError as exc:
                found.append(Drift(
                    'cache instance %d' % cache.cache_id,
                    'its IO-class table could not be read (%s): its cores '
                    'were not compared' % exc,
                    'check casadm (doctor\'s casadm check), then again',
                    UNCHECKED))
                continue
        found += _cache_drift(casadm, cinder, cache, caches, tables)
    for record in journal.records():
        label = record.volume_id or record.spec.image
        if record.state == RELEASING:
            found.append(Drift(
                label, 'its core is gone, but Cinder did not take the clear '
                'of its fence marker, which still names this host',
                'nothing to do once Cinder answers: the next attach or '
                'detach of the volume and nova-compute\'s periodic task '
                'retry it ("os-brick-cas fence-clear %s" clears it by '
                'hand)' % label, 'journal'))
        elif record.state in states.IN_FLIGHT:
            found.append(Drift(
                label, 'a %s was interrupted' % record.state,
                'nova-compute\'s periodic task, the next attach or detach, '
                'or "os-brick-cas undrain --volume %s" finishes it by the '
                'safe order' % label, 'journal'))
        elif record.state == DRAINED:
            try:
                reason = host.not_drained_reason(casadm, record.spec,
                                                 caches, tables)
            except exception.CasError as exc:
                found.append(Drift(
                    label, 'nova holds it drained for a %s, but whether '
                    'the host holds the drain could not be read (%s)'
                    % (record.holder, exc),
                    'check casadm, then again', UNCHECKED))
                continue
            if reason:
                found.append(Drift(
                    label, 'nova holds it drained for a %s (Cinder may '
                    'record it drained), but %s' % (record.holder, reason),
                    'run "os-brick-cas drain --volume %s" on this host (or '
                    'wait for nova-compute\'s periodic task, which drains '
                    'it again)' % label, 'held'))
    for bad in journal.quarantined():
        found.append(Drift(
            bad.path, 'a life-cycle journal file that is not a valid record '
            '(%s) was set aside; the host\'s own state decides for its '
            'volume' % bad.reason,
            'look at it (who wrote it?), then remove it', QUARANTINE))
    return found


def _cache_drift(casadm: casadm_mod.Casadm, cinder: Optional[Cinder],
                 cache: casadm_output.CacheInstance,
                 caches: list[casadm_output.CacheInstance],
                 tables: dict[int, list[casadm_output.IoClass]]
                 ) -> list[Drift]:
    """drift() of one cache instance whose IO-class table was read."""
    found = []
    table = tables[cache.cache_id]
    if not io_class_table.is_composed(table):
        found.append(Drift(
            'cache instance %d' % cache.cache_id,
            'its IO-class table is not the one os-brick-cas composes '
            '(loaded by hand?): %s' % ', '.join(
                '%d:%s:%s' % (c.class_id, c.name, c.allocation)
                for c in table),
            'run "os-brick-cas drain" or "undrain" on a volume of it: '
            'the table is composed again from this host\'s state',
            'table'))
    existing = {core.core_id for core in cache.cores}
    for entry in sorted(io_class_table.entries(table),
                        key=lambda entry: entry.core_id):
        if entry.core_id in existing:
            continue
        core_id = entry.core_id
        found.append(Drift(
            'cache instance %d' % cache.cache_id,
            '%s class of core %d, which does not exist'
            % ('drain' if entry.drained else 'share', core_id),
            'harmless until a core gets id %d; the next attach drops it'
            % core_id, 'gone-class'))
    for core in cache.cores:
        named = rbd_names.parse_link_name(os.path.basename(core.device))
        if not core.active:
            found.append(Drift(
                core.device, '%s is inactive: it may hold the newest '
                'data' % core.label,
                'attach the volume on this host again (or detach it: '
                'the detach flushes it); see "os-brick-cas owners"',
                'inactive'))
        if named is None or cinder is None or cinder.client is None:
            continue
        volume_id = volume_id_of(named)
        if volume_id is None:
            continue
        try:
            owner = cinder.client.owner(volume_id)
        except Exception as exc:
            found.append(Drift(
                volume_id, 'Cinder\'s fence marker could not be read (%s): '
                'not compared with this host' % exc,
                'check the Cinder credentials and that Cinder answers',
                UNCHECKED))
            continue
        if (owner is not None and owner.drained and
                owner.host == cinder.host):
            try:
                reason = host.not_drained_reason(casadm, named, caches, tables)
            except exception.CasError as exc:
                found.append(Drift(
                    volume_id, 'Cinder records it drained, but whether this '
                    'host holds the drain could not be read (%s)' % exc,
                    'check casadm, then again', UNCHECKED))
                continue
            if reason:
                found.append(Drift(
                    volume_id, 'Cinder records it drained, but %s' % reason,
                    'run "os-brick-cas drain --volume %s" (or '
                    '"undrain") so Cinder and this host agree'
                    % volume_id, 'marker'))
    return found
