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

Read by doctor's "life cycle" check and the exporter's drift metric.
"""

import dataclasses
import os
from typing import Optional

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import drain as drain_mod
from os_brick_cas import exception
from os_brick_cas.lifecycle import host
from os_brick_cas.lifecycle import journal
from os_brick_cas.lifecycle import states
from os_brick_cas.lifecycle.states import DRAINED
from os_brick_cas.lifecycle.states import RELEASING
from os_brick_cas.lifecycle.transitions import Cinder
from os_brick_cas.lifecycle.transitions import volume_id_of
from os_brick_cas import rbd_names


@dataclasses.dataclass(frozen=True)
class Drift:
    """A core whose real state differs from its record."""

    volume: str
    problem: str
    action: str
    #: 'table', 'gone-class', 'inactive', 'marker', 'held' or 'journal'
    kind: str = 'table'


def drift(casadm: casadm_mod.Casadm, cinder: Optional[Cinder] = None,
          caches: Optional[list[casadm_mod.CacheInstance]] = None,
          tables: Optional[dict[int, list[casadm_mod.IoClass]]] = None
          ) -> list[Drift]:
    """Each core whose real state differs from what is recorded.

    Hand-loaded IO-class rules, drain classes of cores that do not exist,
    inactive cores, unfinished transitions, drains nova holds (journal)
    that the host does not hold, and (with *cinder*) a marker that says
    "drained" for a core that is not. *caches* and *tables* (IO-class
    tables by instance): a listing the caller already has (the exporter's
    scrape); what is missing is asked of casadm.
    """
    found: list[Drift] = []
    if caches is None:
        caches = casadm.list_caches()
    tables = dict(tables or {})
    for cache in caches:
        try:
            if cache.cache_id not in tables:
                tables[cache.cache_id] = casadm.list_io_classes(
                    cache.cache_id)
        except exception.CasError:
            continue
        table = tables[cache.cache_id]
        drained = drain_mod.drained_cores(table)
        if len(drained) > 32 or table != drain_mod.compose(drained):
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
        for core_id in sorted(drain_mod.drained_cores(table) - existing):
            found.append(Drift(
                'cache instance %d' % cache.cache_id,
                'drain class of core %d, which does not exist' % core_id,
                'harmless until a core gets id %d; the next attach drops it'
                % core_id, 'gone-class'))
        for core in cache.cores:
            named = rbd_names.parse_link_name(os.path.basename(core.device))
            label = core.device
            if not core.active:
                found.append(Drift(
                    label, 'core %d of instance %d is inactive: it may hold '
                           'the newest data' % (core.core_id, cache.cache_id),
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
            except Exception:
                continue
            if (owner is not None and owner.drained and
                    owner.host == cinder.host):
                reason = host.not_drained_reason(casadm, named, caches,
                                                 tables)
                if reason:
                    found.append(Drift(
                        volume_id, 'Cinder records it drained, but %s'
                        % reason,
                        'run "os-brick-cas drain --volume %s" (or '
                        '"undrain") so Cinder and this host agree'
                        % volume_id, 'marker'))
    for spec, record in journal.records():
        label = record.get('volume_id') or spec.image
        if record.get('state') == RELEASING:
            found.append(Drift(
                label, 'its core is gone, but Cinder did not take the clear '
                'of its fence marker (%s)' % record.get('why'),
                'nothing to do if Cinder answers again: the next attach or '
                'detach of the volume and nova-compute\'s periodic task '
                'retry it; "os-brick-cas fence-clear %s" clears it by hand'
                % label, 'journal'))
        elif record.get('state') in states.IN_FLIGHT:
            found.append(Drift(
                label, 'a %s was interrupted' % record['state'],
                'nova-compute\'s periodic task, the next attach or detach, '
                'or "os-brick-cas undrain --volume %s" finishes it by the '
                'safe order' % label, 'journal'))
        elif record.get('state') == DRAINED:
            try:
                reason = host.not_drained_reason(casadm, spec, caches,
                                                 tables)
            except exception.CasError:
                continue
            if reason:
                found.append(Drift(
                    label, 'nova holds it drained for a %s (Cinder may '
                    'record it drained), but %s' % (record.get('holder'),
                                                    reason),
                    'run "os-brick-cas drain --volume %s" on this host (or '
                    'wait for nova-compute\'s periodic task, which drains '
                    'it again)' % label, 'held'))
    return found
