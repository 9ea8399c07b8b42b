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


"""Which supported OpenStack release is installed.

Every difference between the supported releases lives in one small compat
module per package (this one for the host library and os-brick,
:mod:`nova_ext.compat`, :mod:`cinder_ext.compat`), each branch naming its
release; nothing else checks versions. The release is told from the
installed distribution of the service in question, so a node whose nova
and os-brick come from different releases during an upgrade gets each
one's behaviour.
"""

import importlib.metadata
import re
from typing import Optional

#: supported OpenStack releases, oldest first, and the series of each
#: service they ship (doc/source/admin/host-guide.rst,
#: "Supported OpenStack releases")
RELEASES = {
    '2025.1': {'nova': (31,), 'cinder': (26,), 'os-brick': (6, 11)},
    '2026.1': {'nova': (33,), 'cinder': (28,), 'os-brick': (7, 0)},
    '2026.2': {'nova': (34,), 'cinder': (29,), 'os-brick': (7, 1)},
}
OLDEST = next(iter(RELEASES))
NEWEST = list(RELEASES)[-1]


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r'\d+', text.split('+')[0])[:3])


def release_of(distribution: str,
               installed: Optional[str] = None) -> Optional[str]:
    """The supported release whose *distribution* series is installed.

    The newest release whose series is not newer than the installed
    version (a later series behaves as the newest supported one until it
    is added here); None for a version older than every supported release.
    """
    if installed is None:
        installed = importlib.metadata.version(distribution)
    have = _numbers(installed)
    found = None
    for release, series in RELEASES.items():
        wanted = series[distribution]
        if have[:len(wanted)] >= wanted:
            found = release
    return found


def at_least(current: Optional[str], release: str) -> bool:
    """Whether *current* is *release* or a later supported one."""
    order = list(RELEASES)
    return current is not None and order.index(current) >= order.index(
        release)


#: the release of the installed os-brick
OS_BRICK_RELEASE = release_of('os-brick')
