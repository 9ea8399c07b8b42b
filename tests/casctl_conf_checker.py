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

"""Test-only check that casctl would load an opencas.conf (not a copy).

Applies the rules of Open CAS's ``utils/opencas.py`` (``cas_config.
from_file`` with ``allow_incomplete``: devices need not exist), as written
down in docs opencas-cli.md: the first line matches ``version=``; a line is
cut at ``#`` and right-stripped; sections are exactly ``[caches]`` and
``[cores]``; cache rows have 3-4 columns (id 1..16384, mode wt/pt/wa/wb/wo,
``name=value`` options from a known set, none twice); core rows have 3-4
columns (cache id listed under [caches], core id 0..4095, only
``lazy_startup=true|false``); no cache id twice, no (cache, core) twice,
no device (compared by realpath) listed twice as cache or core; no
recursive /dev/casC-N row. Any violation means "Unable to parse config
file" and no cache loads at boot. Not checked: that ioclass_file exists.
"""

import os
import re

CACHE_MODES = ('wt', 'pt', 'wa', 'wb', 'wo')
CACHE_OPTIONS = {
    'cleaning_policy': ('acp', 'alru', 'nop'),
    'promotion_policy': ('always', 'nhit'),
    'cache_line_size': ('4', '8', '16', '32', '64'),
    'lazy_startup': ('true', 'false'),
    'target_failover_state': ('active', 'standby'),
    'ioclass_file': None,  # any value (the file's existence is not checked)
}
CORE_OPTIONS = {'lazy_startup': ('true', 'false')}


class Rejected(ValueError):
    """casctl would refuse the whole file."""


def _options(column: str, allowed: dict) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in column.lower().split(','):
        parts = item.split('=')
        if len(parts) != 2:
            raise Rejected('option %r is not name=value' % item)
        name, value = parts
        if name in found:
            raise Rejected('option %s repeated' % name)
        if name not in allowed:
            raise Rejected('unknown option %s' % name)
        if allowed[name] is not None and value not in allowed[name]:
            raise Rejected('bad value %r for %s' % (value, name))
        found[name] = value
    return found


def _int(text: str, what: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise Rejected('%s %r is not a number' % (what, text))
    if not low <= value <= high:
        raise Rejected('%s %d out of %d..%d' % (what, value, low, high))
    return value


def _recursive(device: str, cache_id: int) -> bool:
    match = re.match(r'/dev/cas(\d+)-', device)
    return bool(match) and int(match.group(1)) == cache_id


def check(text: str) -> None:
    """Raise :class:`Rejected` where casctl would reject *text*."""
    lines = text.split('\n')
    if not re.match(r'^version=', lines[0]):
        raise Rejected('first line is not version=...')
    caches: dict[int, str] = {}
    cores: dict[tuple[int, int], str] = {}
    in_caches = in_cores = False
    for raw in lines[1:]:
        line = raw.split('#')[0].rstrip()
        if not line:
            continue
        if line == '[caches]':
            in_caches = True
            continue
        if line == '[cores]':
            in_caches, in_cores = False, True
            continue
        if not (in_caches or in_cores):
            continue
        columns = line.split()
        if not 3 <= len(columns) <= 4:
            raise Rejected('row %r has %d columns' % (line, len(columns)))
        used = {os.path.realpath(dev) for dev in
                list(caches.values()) + list(cores.values())}
        if in_caches:
            cache_id = _int(columns[0], 'cache id', 1, 16384)
            if columns[2].lower() not in CACHE_MODES:
                raise Rejected('bad cache mode %r' % columns[2])
            if len(columns) == 4:
                _options(columns[3], CACHE_OPTIONS)
            if _recursive(columns[1], cache_id):
                raise Rejected('recursive cache %r' % line)
            if cache_id in caches:
                raise Rejected('cache %d listed twice' % cache_id)
            if os.path.realpath(columns[1]) in used:
                raise Rejected('device %s listed twice' % columns[1])
            caches[cache_id] = columns[1]
            continue
        cache_id = _int(columns[0], 'cache id', 1, 16384)
        core_id = _int(columns[1], 'core id', 0, 4095)
        if _recursive(columns[2], cache_id):
            raise Rejected('recursive core %r' % line)
        if len(columns) == 4:
            _options(columns[3], CORE_OPTIONS)
        if cache_id not in caches:
            raise Rejected('core row %r: cache %d not under [caches]'
                           % (line, cache_id))
        if (cache_id, core_id) in cores:
            raise Rejected('core %d/%d listed twice' % (cache_id, core_id))
        if os.path.realpath(columns[2]) in used:
            raise Rejected('device %s listed twice' % columns[2])
        cores[(cache_id, core_id)] = columns[2]


def check_file(path: str) -> None:
    with open(path) as conf_file:
        check(conf_file.read())
