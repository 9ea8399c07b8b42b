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

"""Open CAS's udev loader on a simulated host (a host knob).

open-cas' rule (60-persistent-storage-cas-load.rules) runs open-cas-loader
on every block-device add: a device whose by-id path is a ``[cores]`` row
of opencas.conf is try-added at once, before anyone else asks. The
simulator plays those events before the next stand-in command runs and
right after ``rbd map`` made a link, so the loader always wins the race:
the deterministic worst case for the product.
"""

import os
from typing import Any, Callable

#: activate(state, cache_id, core_id, resolved device)
Activate = Callable[[dict[str, Any], int, int, str], None]


def listed_cores(path: str) -> list[tuple[int, int, str]]:
    """(cache id, core id, device) of each [cores] row (loader's view)."""
    rows = []
    section = None
    try:
        with open(path) as conf:
            lines = conf.read().splitlines()
    except OSError:
        return []
    for line in lines:
        line = line.split('#', 1)[0].strip()
        if line.startswith('['):
            section = line
        elif line and section == '[cores]':
            fields = line.split()
            if len(fields) >= 3 and fields[0].isdigit() and \
                    fields[1].isdigit():
                rows.append((int(fields[0]), int(fields[1]), fields[2]))
    return rows


def loader_pass(state: dict[str, Any], activate: Activate) -> None:
    """Try-add every listed inactive core whose by-id link now resolves.

    Called once per stand-in command. With a *lag* of N (host knob) the
    loader acts N commands after the one that first saw the link, so a
    test can place the loader's try-add between the product's ``-L`` and
    its own try-add.
    """
    if not state.get('udev_loader') or not state.get('opencas_conf'):
        return
    tick = state['udev_loader_tick'] = state.get('udev_loader_tick', 0) + 1
    seen = state.setdefault('udev_loader_seen', {})
    for cache_id, core_id, device in listed_cores(state['opencas_conf']):
        cache = state['caches'].get(str(cache_id))
        core = cache['cores'].get(str(core_id)) if cache else None
        resolved = os.path.realpath(device)
        if core is None or core['status'] != 'Inactive' or \
                core['device'] != device or resolved not in state['devices']:
            seen.pop(device, None)
            continue
        first = seen.setdefault(device, tick)
        if tick - first < state.get('udev_loader_lag', 0):
            continue
        del seen[device]
        activate(state, cache_id, core_id, resolved)
        state.setdefault('loader_added', []).append(
            [cache_id, core_id, device])
