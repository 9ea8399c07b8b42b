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
from os_brick_cas.cmd.checks import SKIP
from os_brick_cas.cmd.checks import WARN
from os_brick_cas import lifecycle


#: drift kinds that FAIL: Cinder may allow what the host does not back,
#: or a journal file was not a valid record
FAILING = ('marker', 'held', lifecycle.QUARANTINE)


@register('drift')
def drift(host: Host) -> Iterator[Finding]:
    """Cores whose real state differs from their record.

    A table loaded by hand, a drain class of a core that is gone, an
    interrupted drain or undrain, and a drain nova holds (journal) or
    (with Cinder credentials) a fence marker saying "drained" for a core
    that is not - those FAIL: Cinder then allows snapshots that miss
    data. A journal file quarantined as invalid FAILs with its path.
    Inactive cores are reported by the cores check. What could not be
    compared (no Cinder credentials, Cinder or casadm not answering) is
    said so (SKIP or WARN), never reported as matching.
    """
    caches = host.caches()   # NotChecked when casadm does not answer
    client, problem = owners.owner_client()
    cinder = lifecycle.Cinder(host.host, client, problem=problem)
    drifts = [d for d in lifecycle.drift(host.casadm, cinder, caches)
              if d.kind != 'inactive']
    differences = [d for d in drifts if d.kind != lifecycle.UNCHECKED]
    unchecked = [d for d in drifts if d.kind == lifecycle.UNCHECKED]
    for found in drifts:
        level = (FAIL if found.kind in FAILING else WARN)
        yield Finding(level, '%s: %s; %s' % (found.volume, found.problem,
                                             found.action))
    if client is None:
        yield Finding(SKIP, "life cycle: Cinder's fence markers not "
                            'compared with this host (%s)' % (
                                problem or 'no credentials'))
    if differences or unchecked:
        return
    if client is None:
        yield Finding(OK, 'life cycle: the host agrees with its journal '
                          "(Cinder's markers: see the SKIP above)")
    else:
        yield Finding(OK, 'life cycle: every core matches its journal '
                          "record and Cinder's fence marker")
