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

"""Writing an orphaned core's data to Ceph: its attachment is gone.

A server was deleted, or its volume force-detached, while the host was
down: no attachment will ever detach the core, but its data is the newest
there is (the fence marker still names this host and that attachment).
``recover`` maps the image, re-activates and flushes the core, removes it
and unmaps - the detach nova never sent, with the same safety rules. In
the life-cycle table the core is ``orphaned`` and ``recover`` leads to
``absent``. The result is returned; the CLI prints it.
"""

import os
from typing import Optional
import uuid

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import connector as connector_mod
from os_brick_cas import exception
from os_brick_cas import lifecycle
from os_brick_cas import locks
from os_brick_cas import ownership
from os_brick_cas import rbd_names
from os_brick_cas import report


def recover(volume_id: str, owner_epoch: Optional[str], rbd_user: str,
            casadm: casadm_mod.Casadm,
            connector: Optional[connector_mod.CachedRBDConnector] = None
            ) -> report.Outcome:
    """Flush and remove *volume_id*'s core here, if its data is ours.

    *owner_epoch*: the attachment Cinder's marker names on this host
    (None: a marker from before epochs). Refused (done False) when the
    core belongs to another attachment and is dirty, or is not a link
    os-brick-cas names.
    """
    reports = report.host_report(casadm)
    core = report.find_volume_core(reports, volume_id)
    if core is None:
        return report.Outcome(True, 'volume %s has no core on this host; '
                                    'nothing to recover' % volume_id)
    [mode] = [cache.mode for cache in reports
              if cache.cache_id == core.cache_id]
    record = ownership.read(core.core_device)
    try:
        ownership.refuse_unless_owner(
            'recover', volume_id, core.cache_id, core.core_id, record,
            owner_epoch, lambda: core.dirty_blocks or 0)
    except exception.NotDataOwner as exc:
        return report.Outcome(False, 'refused: %s (see "os-brick-cas '
                                     'discard").' % exc)
    spec = rbd_names.parse_link_name(os.path.basename(core.core_device))
    if spec is None:
        return report.Outcome(False, 'refused: %s is not a link os-brick-cas '
                                     'names; detach the volume through nova '
                                     'instead.' % core.core_device)
    props = {
        'name': spec.path,
        'volume_id': volume_id, 'cacheable': True,
        'cache_mode': mode.rsplit('->', 1)[-1],
        'cluster_fsid': str(uuid.UUID(hex=spec.fsid)),
        'auth_username': rbd_user, 'auth_enabled': True,
        'hosts': [], 'ports': []}
    if record is not None:
        props['cas_owner_epoch'] = record.epoch
    with locks.volume_lock(spec):
        try:
            lifecycle.require(casadm, spec, 'recover', volume_id,
                              classified=lifecycle.ORPHANED)
        except exception.TransitionRefused as exc:
            return report.Outcome(False, 'refused: %s' % exc)
        (connector or connector_mod.CachedRBDConnector(None)
         ).disconnect_volume(props, None)
    return report.Outcome(True, 'recovered volume %s: %s flushed to Ceph '
                                'and removed' % (volume_id, core.label))
