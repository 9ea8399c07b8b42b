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

"""The casadm runtime parameters a host layout sets, and their names.

One row per parameter: the ``-X``/``-G`` namespace, the ``-X`` long option,
the row title ``casadm -G -o csv`` prints, the layout field, its range and
Open CAS's own default. Ranges and defaults are OCF's (inc/cleaning/alru.h,
acp.h, promotion/nhit.h, ocf_def.h) and casadm's (casadm/cas_main.c), the
same in v24.9, v25.12.2 and v26.03.2 except where ``since`` says otherwise.
"""

import dataclasses
from typing import Optional

#: the first release line whose casadm knows the ALRU dirty-ratio trigger
DIRTY_RATIO_SINCE = (25, 12)

CLEANING = 'cleaning'
CLEANING_ALRU = 'cleaning-alru'
CLEANING_ACP = 'cleaning-acp'
PROMOTION = 'promotion'
PROMOTION_NHIT = 'promotion-nhit'
SEQ_CUTOFF = 'seq-cutoff'

CLEANING_POLICIES = ('alru', 'acp', 'nop')
PROMOTION_POLICIES = ('always', 'nhit')
SEQ_CUTOFF_POLICIES = ('always', 'full', 'never')
LINE_SIZES_KIB = (4, 8, 16, 32, 64)


@dataclasses.dataclass(frozen=True)
class Param:
    """One casadm runtime parameter."""

    namespace: str
    option: str                 # -X long option, without the dashes
    title: str                  # row title of -G -o csv
    field: str                  # key in the layout's section
    low: Optional[int] = None   # None: a choice among ``choices``
    high: Optional[int] = None
    choices: tuple[str, ...] = ()
    default: object = None      # Open CAS's default
    since: Optional[tuple[int, int]] = None

    @property
    def per_core(self) -> bool:
        return self.namespace == SEQ_CUTOFF


PARAMS: tuple[Param, ...] = (
    Param(CLEANING, 'policy', 'Cleaning policy type', 'policy',
          choices=CLEANING_POLICIES, default='alru'),
    Param(CLEANING_ALRU, 'wake-up', 'Wake up time [s]', 'wake_up_s',
          0, 3600, default=20),
    Param(CLEANING_ALRU, 'staleness-time', 'Stale buffer time [s]',
          'staleness_s', 1, 3600, default=120),
    Param(CLEANING_ALRU, 'flush-max-buffers', 'Flush max buffers',
          'flush_max_buffers', 1, 10000, default=100),
    Param(CLEANING_ALRU, 'activity-threshold', 'Activity threshold [ms]',
          'activity_threshold_ms', 0, 1000000, default=10000),
    Param(CLEANING_ALRU, 'dirty-ratio-threshold',
          'Dirty ratio trigger threshold [%]', 'dirty_ratio_threshold_pct',
          0, 100, default=100, since=DIRTY_RATIO_SINCE),
    Param(CLEANING_ALRU, 'dirty-ratio-inertia',
          'Dirty ratio trigger inertia [MiB]', 'dirty_ratio_inertia_mib',
          0, 4095, default=128, since=DIRTY_RATIO_SINCE),
    Param(CLEANING_ACP, 'wake-up', 'Wake up time [ms]', 'wake_up_ms',
          0, 10000, default=10),
    Param(CLEANING_ACP, 'flush-max-buffers', 'Flush max buffers',
          'flush_max_buffers', 1, 10000, default=128),
    Param(PROMOTION, 'policy', 'Promotion policy type', 'policy',
          choices=PROMOTION_POLICIES, default='always'),
    Param(PROMOTION_NHIT, 'threshold', 'Insertion threshold', 'threshold',
          2, 1000, default=3),
    Param(PROMOTION_NHIT, 'trigger', 'Policy trigger [%]', 'trigger_pct',
          0, 100, default=80),
    Param(SEQ_CUTOFF, 'threshold', 'Sequential cutoff threshold [KiB]',
          'threshold_kib', 1, 4194181, default=1024),
    Param(SEQ_CUTOFF, 'policy', 'Sequential cutoff policy', 'policy',
          choices=SEQ_CUTOFF_POLICIES, default='full'),
    Param(SEQ_CUTOFF, 'promotion-count',
          'Sequential cutoff promotion request count threshold',
          'promotion_count', 1, 65535, default=8),
)


def of_namespace(namespace: str) -> tuple[Param, ...]:
    """The parameters of one ``-X``/``-G`` namespace, in casadm's order."""
    return tuple(p for p in PARAMS if p.namespace == namespace)


def find(namespace: str, field: str) -> Param:
    for param in PARAMS:
        if param.namespace == namespace and param.field == field:
            return param
    raise KeyError('%s %s' % (namespace, field))


def namespace_of_policy(section: str, policy: str) -> Optional[str]:
    """The namespace holding *policy*'s own parameters (cleaning-alru...)."""
    if section == CLEANING and policy in ('alru', 'acp'):
        return 'cleaning-' + policy
    if section == PROMOTION and policy == 'nhit':
        return PROMOTION_NHIT
    return None


def supported(param: Param, release: Optional[tuple[int, int]]) -> bool:
    """Whether casadm of release line *release* knows *param*."""
    return param.since is None or (release is not None and
                                   release >= param.since)
