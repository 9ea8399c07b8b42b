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

"""doctor's check that every core's real state matches its record."""

from typing import Iterator

from os_brick_cas.cmd.checks import FAIL
from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import OK
from os_brick_cas.cmd.checks import owners
from os_brick_cas.cmd.checks import register
from os_brick_cas.cmd.checks import WARN
from os_brick_cas import lifecycle


@register('drift')
def drift(host: Host) -> Iterator[Finding]:
    """Cores whose real state differs from their record.

    A table loaded by hand, a drain class of a core that is gone, an
    interrupted drain or undrain, and a drain nova holds (journal) or
    (with Cinder credentials) a fence marker saying "drained" for a core
    that is not - those FAIL: Cinder then allows snapshots that miss
    data. Inactive cores are reported by the cores check.
    """
    caches = host.caches()   # NotChecked when casadm does not answer
    client, problem = owners.owner_client()
    cinder = lifecycle.Cinder(host.host, client, problem=problem)
    drifts = [d for d in lifecycle.drift(host.casadm, cinder, caches)
              if d.kind != 'inactive']
    for found in drifts:
        yield Finding(FAIL if found.kind in ('marker', 'held') else WARN,
                      '%s: %s; %s' % (found.volume, found.problem,
                                      found.action))
    if not drifts:
        yield Finding(OK, 'life cycle: every core matches its record%s' % (
            '' if client else ' (Cinder markers not compared: %s)' % (
                problem or 'no credentials')))
