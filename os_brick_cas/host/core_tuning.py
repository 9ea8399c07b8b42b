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

"""The host layout's per-core parameters for a core the attach just added.

Sequential cut-off is a property of each core, not of its instance: Open
CAS gives every core it adds its own defaults (full, 1024 KiB), and
``host apply`` can only set the cores that exist when it runs. So the
attach that adds a core gives it the layout's values, one ``casadm
--set-param --name seq-cutoff --core-id`` when they differ from Open
CAS's defaults. They tune performance, never safety: a missing or broken
layout, or a failing casadm, costs a warning and the attach goes on.
Cores re-activated after a reboot keep what Open CAS's metadata holds.
"""

import os
from typing import Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas.host import layout_file
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import casadm_params as params
from os_brick_cas import opts

LOG = logging.getLogger(__name__)


def _instance_layout(cache_id: int, conf: cfg.ConfigOpts
                     ) -> Optional[layout_file.InstanceLayout]:
    path = conf[opts.GROUP].host_layout
    if not os.path.exists(path):
        LOG.debug('No host layout at %s: new cores keep Open CAS defaults.',
                  path)
        return None
    try:
        layout = layout_file.load(path)
    except exception.HostLayoutInvalid as exc:
        LOG.warning('%s New cores keep Open CAS defaults until it is fixed '
                    '("os-brick-cas host check" then shows the drift).', exc)
        return None
    return layout.find(cache_id)


def new_core_values(cache_id: int, conf: cfg.ConfigOpts = cfg.CONF
                    ) -> list[tuple[str, object]]:
    """The (option, value) pairs a new core of *cache_id* must be given.

    Empty without a layout, for an instance the layout does not list, and
    where the layout asks for Open CAS's own defaults.
    """
    instance = _instance_layout(cache_id, conf)
    if instance is None:
        return []
    return [(setting.param.option, setting.value)
            for setting in instance.core_settings()
            if setting.value != setting.param.default]


def tune_new_core(casadm: casadm_mod.Casadm, core: casadm_output.Core,
                  conf: cfg.ConfigOpts = cfg.CONF) -> None:
    """Give *core*, just added, the layout's sequential cut-off."""
    values = new_core_values(core.cache_id, conf)
    if not values:
        return
    summary = ', '.join('%s %s' % value for value in values)
    try:
        casadm.set_params(params.SEQ_CUTOFF, core.cache_id, values,
                          core_id=core.core_id)
    except exception.CasError as exc:
        LOG.warning('Could not give %(core)s the host layout\'s sequential '
                    'cut-off (%(values)s): %(err)s. It caches with Open '
                    'CAS defaults; run "os-brick-cas host apply" to set it.',
                    {'core': core.label, 'values': summary, 'err': exc})
        return
    LOG.debug('Sequential cut-off of %(core)s: %(values)s from the host '
              'layout.', {'core': core.label, 'values': summary})
