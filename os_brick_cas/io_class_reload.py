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

"""Reload an instance's IO-class table from its volumes' shares and drains.

The repair for a table that differs from what the attached volumes should
have (doctor's "shares" check): a share class at the wrong cap, a volume
whose share was lost to the class budget while ids or percent are free
again, a hand-loaded rule. The table is composed by
:func:`io_class_table.expected` (drains stay exactly as loaded: a reload
never undrains a core) under the instance lock and the IO-class table
lock, in the order a drain takes them.
"""

import dataclasses
from typing import Optional

from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import deadline as deadline_mod
from os_brick_cas import exception
from os_brick_cas import io_class_table
from os_brick_cas import locks
from os_brick_cas.opencas import casadm_output
from os_brick_cas import share_usage

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Reloaded:
    """What a reload of instance *cache_id*'s table did."""

    cache_id: int
    changed: bool
    #: cores whose share still does not fit the budget, newest first
    unshared: tuple[int, ...] = ()


def reload_table(casadm: casadm_mod.Casadm, cache_id: int,
                 limit: Optional[deadline_mod.Deadline] = None) -> Reloaded:
    """Load the table instance *cache_id*'s cores should have, if it differs.

    Takes the instance lock, then the IO-class table lock (the drain's
    order), so no drain, undrain, attach or detach changes the table
    between the read and the load.
    """
    wait = None if limit is None else limit.left()
    with locks.cache_lock(cache_id, wait):
        with io_class_table.table_lock(
                cache_id, None if limit is None else limit.left()):
            cache = _instance(casadm, cache_id)
            table = casadm.list_io_classes(cache_id)
            composed = io_class_table.expected(
                table, share_usage.asked_shares(cache),
                (core.core_id for core in cache.cores))
            changed = composed.table != table
            if changed:
                casadm.load_io_classes(cache_id, composed.table)
                LOG.info('Reloaded the IO-class table of cache instance '
                         '%d from its volumes\' shares and drains', cache_id)
            io_class_table.warn_unshared(cache_id, composed)
            return Reloaded(cache_id, changed, composed.unshared)


def _instance(casadm: casadm_mod.Casadm, cache_id: int
              ) -> casadm_output.CacheInstance:
    for cache in casadm.list_caches():
        if cache.cache_id == cache_id:
            return cache
    raise exception.CacheNotFound(cache_id=cache_id)
