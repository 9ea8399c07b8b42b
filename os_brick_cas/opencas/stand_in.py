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

"""How the host simulator names itself, so nothing inspects PATH.

The stand-in casadm adds one row to ``casadm -V`` that real casadm never
prints (it prints exactly the kernel module and CLI utility rows); the
table keeps the ``Name,Version`` shape every parser reads. doctor asks
casadm, not the file system, whether the host is simulated. A leaf: the
simulator imports it, and it imports nothing.
"""

from typing import Mapping

#: the ``casadm -V`` row (Name column) only the stand-in prints; its
#: Version column is the simulated Open CAS release
SIMULATOR_ROW = 'os-brick-cas host simulator'


def is_simulator(versions: Mapping[str, str]) -> bool:
    """Whether ``casadm -V`` (name -> version) came from the stand-in."""
    return SIMULATOR_ROW in versions
