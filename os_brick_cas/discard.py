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

"""Dropping a volume's stale cached data that Cinder records as lost.

The one path in os-brick-cas that drops dirty data on purpose: after
``fence-clear --host-lost`` declared an owner (host + attachment) lost and
its server moved on, that host's cached blocks of the volume are older
than what Ceph has. They may go only if this host's ownership record names
an attachment on Cinder's lost list, and the operator confirms.
"""

import os
from typing import Iterable

from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas import lifecycle
from os_brick_cas import locks
from os_brick_cas import ownership
from os_brick_cas.privileged import devices as priv_devices
from os_brick_cas import rbd_names
from os_brick_cas import report

LOG = logging.getLogger(__name__)


def discard(volume_id: str, lost_epochs: Iterable[str], confirmed: bool,
            casadm: casadm_mod.Casadm) -> report.Outcome:
    """Drop *volume_id*'s core here if its attachment was declared lost.

    Under the volume's life-cycle lock (no attach, drain or recover
    meanwhile). done: dropped (or nothing cached); else refused or not
    confirmed, with what to do.
    """
    core = report.find_volume_core(report.host_report(casadm), volume_id)
    spec = (rbd_names.parse_link_name(os.path.basename(core.core_device))
            if core is not None else None)
    if spec is None:
        return _discard(volume_id, lost_epochs, confirmed, casadm)
    with locks.volume_lock(spec):
        try:
            # declared lost by Cinder: its core here is stale (an
            # unfinished drain or undrain is resolved first)
            lifecycle.require(casadm, spec, 'discard', volume_id,
                              classified=lifecycle.STALE)
        except exception.TransitionRefused as exc:
            return report.Outcome(False, 'refused: %s' % exc)
        outcome = _discard(volume_id, lost_epochs, confirmed, casadm)
        if outcome.done:
            lifecycle.advance(spec, lifecycle.STALE, 'discard', volume_id)
        return outcome


def _discard(volume_id: str, lost_epochs: Iterable[str], confirmed: bool,
             casadm: casadm_mod.Casadm) -> report.Outcome:
    lost = set(lost_epochs)
    core = report.find_volume_core(report.host_report(casadm), volume_id)
    if core is None:
        return report.Outcome(True, 'volume %s has no core on this host; '
                                    'nothing to discard' % volume_id)
    label = '%s (%s, %s dirty blocks)' % (core.label, core.status,
                                          core.dirty_blocks)
    record = ownership.read(core.core_device)
    if record is None or record.epoch not in lost:
        return report.Outcome(False, (
            'refused: %s of volume %s belongs to attachment %s, which '
            'Cinder does not record as lost; its data may be the newest '
            'there is. Detach or re-attach the volume on this host to '
            'flush it instead.') % (label, volume_id,
                                    record.epoch if record else
                                    '(unknown: no ownership record)'))
    if not confirmed:
        return report.Outcome(False, (
            'would DROP %s of volume %s (attachment %s, declared lost). '
            'Rerun with --yes to drop it.') % (label, volume_id,
                                               record.epoch))
    with locks.cache_lock(core.cache_id):
        casadm.discard_core(core.core)
    LOG.warning('Discarded %s of volume %s: attachment %s was declared '
                'lost', label, volume_id, record.epoch)
    priv_devices.forget_core(core.cache_id, core.core_id, core.core_device)
    priv_devices.forget_owner(core.core_device, core.cache_id, core.core_id)
    return report.Outcome(True, 'dropped %s of volume %s' % (label,
                                                             volume_id))
