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

"""doctor's check of the host preparation: boot order and host layout."""

from typing import Iterator

from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import register


@register('host-layout')
def host_layout(host: Host) -> Iterator[Finding]:
    """Boot order, casadm/module release line, and ``host check``."""
    from os_brick_cas.cmd import host as host_cmd
    for level, message in host_cmd.doctor_findings(host.casadm, host.conf):
        yield Finding(level, message)
