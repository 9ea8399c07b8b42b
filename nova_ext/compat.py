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


"""Differences between the nova releases nova_ext supports.

The only place nova_ext tells nova releases apart (see
:mod:`os_brick_cas.compat`); each branch names its release.
"""

import nova.conf

from os_brick_cas import compat

CONF = nova.conf.CONF

#: the supported release of the installed nova (None: older than 2025.1)
RELEASE = compat.release_of('nova')

#: release -> {LibvirtDriver method: parameters} where that release's
#: nova differs from the newest one's (nova_ext.driver.OVERRIDDEN).
#: Compared for nova 31 (2025.1) and 33 (2026.1): no overridden method
#: changed its parameters.
SIGNATURE_CHANGES: dict[str, dict[str, list[str]]] = {
    '2025.1': {},
    '2026.1': {},
    '2026.2': {},
}


def signatures(newest: dict[str, list[str]]) -> dict[str, list[str]]:
    """The parameters each overridden method has in the installed release.

    An unsupported (older) nova is checked against the oldest release's,
    so the startup check names what it lacks.
    """
    expected = dict(newest)
    expected.update(SIGNATURE_CHANGES[RELEASE or compat.OLDEST])
    return expected


def block_volume_aio_native() -> bool:
    """Whether a block-device volume's disk gets ``io=native``.

    2026.1 (nova 33) added ``[libvirt]use_default_aio_mode_for_volumes``
    (True leaves the AIO mode to QEMU); 2025.1 (nova 31) has no such
    option and its block-device volume drivers always ask for native.
    """
    if not compat.at_least(RELEASE, '2026.1'):
        return True
    return not CONF.libvirt.use_default_aio_mode_for_volumes
