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

"""The privsep contexts root operations of os-brick-cas run in.

``default`` runs the short calls (each bounded by ``casadm_timeout``);
``flush`` runs flushes and core removals, which may take up to
``flush_timeout``, in a daemon of its own, so hung or slow short calls can
never take the workers a flush needs (and the other way round).

Entry points live in small per-topic modules next to this one; each takes
typed, validated arguments and builds its own argv. None of them executes a
command line supplied by its caller.
"""

from oslo_privsep import capabilities as caps
from oslo_privsep import priv_context

default = priv_context.PrivContext(
    __name__,
    cfg_section='privsep_os_brick_cas',
    pypath=__name__ + '.default',
    capabilities=[caps.CAP_SYS_ADMIN, caps.CAP_DAC_OVERRIDE,
                  caps.CAP_DAC_READ_SEARCH, caps.CAP_MKNOD],
    logger_name=__name__,
)

flush = priv_context.PrivContext(
    __name__,
    cfg_section='privsep_os_brick_cas_flush',
    pypath=__name__ + '.flush',
    capabilities=[caps.CAP_SYS_ADMIN, caps.CAP_DAC_OVERRIDE,
                  caps.CAP_DAC_READ_SEARCH],
    logger_name=__name__,
)
