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

"""Host-side ownership records: which attachment a core's data belongs to.

One JSON file per core, named after the core's by-id link, under
``[os_brick_cas] state_path``/owners. It is written (as root, through
:mod:`os_brick_cas.privileged.devices`) when a core is added or claimed by
an attachment and removed with the core. Reading needs no privileges.

The record is the host's half of the ownership rule; the volume's fence
marker in Cinder is the other. A core's dirty data goes to Ceph only if
the marker names this host and the record's epoch; a core whose epoch is
not the caller's attachment is never reused with its old blocks.
"""

import dataclasses
import json
import os
from typing import Callable, Optional

from oslo_config import cfg

from os_brick_cas import exception
from os_brick_cas import opts
from os_brick_cas import validation

CONF = cfg.CONF

#: owner epoch of a caller that does not know who owns the volume's data
#: (no fence marker in use, or a marker set before epochs were recorded)
UNKNOWN = None


@dataclasses.dataclass(frozen=True)
class OwnerRecord:
    """The attachment whose data core *core_id* of *cache_id* caches."""

    link: str
    epoch: str
    cache_id: int
    core_id: int

    def names_core(self, cache_id: int, core_id: int) -> bool:
        return (self.cache_id, self.core_id) == (cache_id, core_id)


def owners_dir() -> str:
    return os.path.join(CONF[opts.GROUP].state_path, 'owners')


def record_path(link: str) -> str:
    """Where the record of the core added as by-id *link* is kept."""
    return os.path.join(owners_dir(),
                        os.path.basename(validation.rbd_link(link)))


def read(link: str) -> Optional[OwnerRecord]:
    """The record of the core added as *link*, or None."""
    try:
        with open(record_path(link)) as record_file:
            data = json.load(record_file)
    except FileNotFoundError:
        return None
    return OwnerRecord(link=data['link'], epoch=data['epoch'],
                       cache_id=int(data['cache_id']),
                       core_id=int(data['core_id']))


def encode(record: OwnerRecord) -> str:
    return json.dumps(dataclasses.asdict(record), sort_keys=True) + '\n'


def not_owner(action: str, volume: str, cache_id: int, core_id: int,
              dirty: int, record: Optional[OwnerRecord],
              owner_epoch: Optional[str]) -> exception.NotDataOwner:
    """The refusal for dirty data of an attachment that is not the owner."""
    return exception.NotDataOwner(
        action=action, volume=volume, core=core_id, cache_id=cache_id,
        dirty=dirty, epoch=record.epoch if record else 'unknown (no record)',
        owner='attachment %s of this host' % owner_epoch if owner_epoch
        else 'another host or no host')


def owner_epoch_of(owner_host: Optional[str], owner_epoch: Optional[str],
                   this_host: str) -> Optional[str]:
    """The owner as the rule reads it, from Cinder's marker.

    UNKNOWN when the marker names this host without an epoch (a marker
    from before epochs); '' when it names another host or none; else the
    owning attachment of this host.
    """
    if owner_host != this_host:
        return ''
    return owner_epoch


def refuse_unless_owner(action: str, volume: str, cache_id: int,
                        core_id: int, record: Optional[OwnerRecord],
                        owner_epoch: Optional[str],
                        dirty_blocks: Callable[[], int],
                        also: Optional[str] = None) -> None:
    """The one rule: may this host write this core's dirty data to Ceph?

    Yes when the owner is UNKNOWN (nobody to ask: the caller knows no
    marker), when the core's record names the owning attachment
    *owner_epoch* (or *also*, the caller's own attachment), or when the
    core is clean (nothing of another owner would be written). Otherwise
    NotDataOwner: the newest data is elsewhere, and these blocks would
    overwrite it. *dirty_blocks* is asked only when the verdict needs it.
    """
    if owner_epoch is UNKNOWN:
        return
    if record is not None and record.epoch in (owner_epoch, also):
        return
    dirty = dirty_blocks()
    if dirty:
        raise not_owner(action, volume, cache_id, core_id, dirty, record,
                        owner_epoch)


def verdict(attachment: Optional[str], dirty_blocks: Optional[int],
            owner_host: Optional[str], owner_epoch: Optional[str],
            lost_epochs: set, this_host: str) -> str:
    """What a core's data is, given who Cinder names as owner now."""
    if owner_host == this_host and owner_epoch in (None, attachment):
        return 'owner: this host'
    if attachment is not None and attachment in lost_epochs:
        return 'stale, owner declared lost: discard'
    if not dirty_blocks:
        return 'clean'
    if owner_host is None:
        return 'NO OWNER recorded: investigate before anything'
    return 'stale: newer data is with %s' % owner_host
