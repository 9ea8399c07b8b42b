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

"""The stand-in casadm's data-true cache instances (host setting).

When ``state['datapath']`` is set, every cache instance of the simulated
host is served by a cache engine (:mod:`.datapath`): /dev/casX-Y is a block
node of a loop device over that engine, flushes really clean lines to the
core, and ``-P`` reads the engine's counters. Without it the counter-only
simulator answers, with the same front-end (casadm.py).
"""

import os
from typing import Any, Optional

from cas_standin.datapath import engine as eng
from cas_standin.datapath import standin
from cas_standin import devices

StandInError = standin.StandInError


def enabled(state: dict[str, Any]) -> bool:
    return bool(state.get('datapath'))


def directory(state_dir: str, cache_id: int) -> str:
    return os.path.join(state_dir, 'cas', str(cache_id))


def ensure_running(state_dir: str, state: dict[str, Any],
                   cache_id: int) -> str:
    """The instance's directory, its server started (or loaded) if needed."""
    path = directory(state_dir, cache_id)
    if not standin.running(path):
        os.makedirs(path, exist_ok=True)
        mode = state['caches'][str(cache_id)]['mode']
        standin.start(path, mode, state['datapath']['lines'])
    return path


def export(state_dir: str, state: dict[str, Any], cache_id: int,
           core_id: int, core: dict[str, Any], exported: str) -> None:
    """Attach *core* to the engine and make *exported* its loop's node."""
    path = ensure_running(state_dir, state, cache_id)
    loop = standin.export(path, core_id, core['resolved'])
    core['loop'] = loop
    devices.block_node(state, exported, loop)


def flush(state_dir: str, cache_id: int, core_id: Optional[int]) -> int:
    """Clean a core's (or every) dirty line; returns lines cleaned."""
    path = directory(state_dir, cache_id)
    key = 'total' if core_id is None else str(core_id)
    before = _dirty(standin.stats(path), key)
    command = 'flush' if core_id is None else 'flush %d' % core_id
    standin.control(path, command)
    return before - _dirty(standin.stats(path), key)


def _dirty(counters: dict[str, Any], key: str) -> int:
    if key == 'total':
        return counters['total']['dirty']
    return counters['cores'].get(key, {}).get('dirty', 0)


def unexport(core: dict[str, Any]) -> None:
    loop = core.pop('loop', None)
    if loop:
        standin.unexport(loop)


def remove(state_dir: str, cache_id: int, core_id: int, core: dict[str, Any],
           verb: str) -> int:
    """Detach the exported object, then ``remove``/``detach``/``drop``.

    Returns the dirty lines a ``drop`` discarded.
    """
    path = directory(state_dir, cache_id)
    unexport(core)
    dirty = _dirty(standin.stats(path), str(core_id))
    standin.control(path, '%s %d' % (verb, core_id))
    return dirty if verb == 'drop' else 0


def forget_inactive(state_dir: str, state: dict[str, Any], cache_id: int,
                    core_id: int) -> None:
    """--remove-inactive: the engine drops the core's lines."""
    path = ensure_running(state_dir, state, cache_id)
    standin.control(path, 'drop %d' % core_id)


def control(state_dir: str, cache_id: int, command: str) -> None:
    path = directory(state_dir, cache_id)
    if standin.running(path):
        standin.control(path, command)


def counters(state_dir: str, cache_id: int) -> Optional[dict[str, Any]]:
    """The engine's counters, None if the instance never held data."""
    path = directory(state_dir, cache_id)
    if not (standin.running(path) or standin.has_metadata(path)):
        return None
    return standin.stats(path)


def stop(state_dir: str, state: dict[str, Any], cache_id: int) -> None:
    """Detach its loops and end the server; dirty lines stay."""
    for core in state['caches'].get(str(cache_id), {}).get(
            'cores', {}).values():
        unexport(core)
    standin.stop(directory(state_dir, cache_id))


def stop_all(state_dir: str, state: dict[str, Any]) -> None:
    root = os.path.join(state_dir, 'cas')
    for cache_id in sorted(os.listdir(root) if os.path.isdir(root) else []):
        stop(state_dir, state, int(cache_id))


def destroy_cache_file(state_dir: str, cache_id: int) -> None:
    """The "SSD died": the instance's cache file is gone."""
    path = standin.cache_file(directory(state_dir, cache_id))
    if os.path.exists(path):
        os.unlink(path)


def check_at_load(state_dir: str, cache_id: int) -> Optional[str]:
    """Why the instance cannot be loaded at boot (None: it can)."""
    path = directory(state_dir, cache_id)
    if not standin.has_metadata(path):
        return None
    try:
        eng.CacheEngine.load(standin.cache_file(path)).close()
    except eng.CacheDeviceLost as lost:
        return str(lost)
    return None


def discard(state_dir: str, cache_id: int) -> None:
    """Forget the instance's cache file (start without --load)."""
    path = directory(state_dir, cache_id)
    for name in ('ssd', 'ssd.meta'):
        try:
            os.unlink(os.path.join(path, name))
        except FileNotFoundError:
            pass


def overlay_core(core: dict[str, Any], counters: dict[str, Any]
                 ) -> dict[str, Any]:
    """*core* with the engine's numbers in the keys stats.py reads."""
    out = dict(core)
    reads = ('read_hits', 'read_partial_misses', 'read_full_misses')
    writes = ('write_hits', 'write_partial_misses', 'write_full_misses')
    out.update({key: counters.get(key, 0) for key in reads + writes + (
        'pass_through_reads', 'pass_through_writes')})
    out['read_total'] = sum(counters.get(key, 0) for key in reads)
    out['write_total'] = sum(counters.get(key, 0) for key in writes)
    out['dirty'] = counters.get('dirty', 0)
    out['clean'] = counters.get('occupancy', 0) - out['dirty']
    return out


def overlay_cache(cache: dict[str, Any], counters: dict[str, Any]
                  ) -> dict[str, Any]:
    """*cache* with engine numbers in its cores and its size in lines."""
    out = dict(cache, size_blocks=counters['lines'])
    out['cores'] = {core_id: overlay_core(core, counters['cores'].get(
        core_id, {})) for core_id, core in cache['cores'].items()}
    return out
