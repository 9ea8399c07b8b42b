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

"""Open CAS cache modes and what they mean for data safety."""

import enum


class CacheMode(str, enum.Enum):
    """A cache instance's write policy, as casadm names it."""

    WRITE_THROUGH = 'wt'
    WRITE_BACK = 'wb'
    WRITE_AROUND = 'wa'
    WRITE_ONLY = 'wo'
    PASS_THROUGH = 'pt'

    @property
    def holds_dirty_data(self) -> bool:
        """True if the host SSD may hold data that Ceph does not have yet."""
        return self in (CacheMode.WRITE_BACK, CacheMode.WRITE_ONLY)

    def __str__(self) -> str:
        return self.value


#: Modes that never hold dirty data, in the order a safe fallback tries them.
CLEAN_MODES = (CacheMode.WRITE_THROUGH, CacheMode.WRITE_AROUND,
               CacheMode.PASS_THROUGH)

ALL_MODES = tuple(mode.value for mode in CacheMode)
