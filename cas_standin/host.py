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

"""Control operations on a simulated host (what tests and the demo do).

These are the knobs the real tools don't have: create the host, inject
faults, make a core dirty, reboot, look at the state.
"""

import configparser
import glob
import os
import shlex
import stat
import sys
import sysconfig
import time
from typing import Any, Iterable, Optional

from cas_standin import datatrue
from cas_standin import devices
from cas_standin import faults
from cas_standin import rbd
from cas_standin import releases
from cas_standin import state as state_mod
from os_brick_cas.opencas import opencas_conf

TOOLS = {'casadm': 'cas_standin.casadm',
         'rbd': 'cas_standin.rbd',
         'udevadm': 'cas_standin.udevadm'}
#: the loaded module's MODULE_VERSION, under :attr:`host_root`
MODULE_VERSION_FILE = 'sys/module/cas_cache/version'


def _stand_in_pythonpath() -> str:
    """Where the stand-ins find cas_standin, os_brick_cas and dependencies.

    cas_standin imports the facts of os_brick_cas.opencas (and rbd_names)
    and nothing else of os_brick_cas.

    They start with ``python -S`` (no site initialisation of a venv full
    of OpenStack packages) and keep their bytecode in the state directory
    even where PYTHONDONTWRITEBYTECODE is set: ~95 ms -> ~64 ms per call
    on the 2-vCPU CI machine. Stand-in start-up, not the product, is what
    the concurrency benchmark mostly measures.
    """
    package_root = os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    paths = sysconfig.get_paths()
    return os.pathsep.join(dict.fromkeys(
        [package_root, paths['purelib'], paths['platlib']]))


class SimulatedHostControl(object):
    """Operations on the simulated host whose state lives in *state_dir*."""

    def __init__(self, state_dir: str):
        self.state_dir = state_dir
        self.bin_dir = os.path.join(state_dir, 'bin')

    def init(self, caches: dict[int, str], udev_by_id: bool = False,
             rbd_backend: str = 'file', device_offset: int = 0,
             datapath_lines: Optional[int] = None,
             pycache_dir: Optional[str] = None) -> None:
        """Boot a fresh host and write the casadm/rbd wrappers.

        *device_offset* shifts the numbers of /dev/rbdN and of core ids, so
        two simulated hosts in one test never create the same /dev entry.
        *datapath_lines* makes every cache instance data-true (a cache
        engine of that many 4 KiB lines behind each /dev/casX-Y).
        *pycache_dir* holds the stand-ins' byte code (default: in the state
        directory, compiled again for every new host).
        """
        os.makedirs(self.bin_dir, exist_ok=True)
        state = state_mod.new_state(caches)
        state.update(udev_by_id=udev_by_id, rbd_backend=rbd_backend,
                     device_offset=device_offset,
                     datapath={'lines': datapath_lines}
                     if datapath_lines else None)
        state_mod.write(self.state_dir, state)
        self._publish_module_version()
        for tool, module in TOOLS.items():
            path = os.path.join(self.bin_dir, tool)
            with open(path, 'w') as wrapper:
                wrapper.write(
                    '#!/bin/sh\n%s=%s PYTHONPATH=%s PYTHONDONTWRITEBYTECODE= '
                    'PYTHONPYCACHEPREFIX=%s exec %s -S -m %s "$@"\n'
                    % (state_mod.ENV, shlex.quote(self.state_dir),
                       shlex.quote(_stand_in_pythonpath()),
                       shlex.quote(pycache_dir or
                                   os.path.join(self.state_dir, 'pycache')),
                       shlex.quote(sys.executable), module))
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR |
                     stat.S_IXGRP | stat.S_IXOTH)

    def _update(self, **settings: Any) -> None:
        with state_mod.locked(self.state_dir) as state:
            state.update(settings)
        if {'version', 'module_loaded'} & set(settings):
            self._publish_module_version()

    @property
    def host_root(self) -> str:
        """This host's stand-in for ``/`` as ``[os_brick_cas] host_root``.

        It holds ``sys/module/cas_cache/version`` while the module is
        loaded: the release ``casadm -V`` reports, which the known-defect
        gate reads as it does on a real host.
        """
        return os.path.join(self.state_dir, 'root')

    def _publish_module_version(self) -> None:
        state = self.state()
        path = os.path.join(self.host_root, MODULE_VERSION_FILE)
        if not state['module_loaded']:
            if os.path.exists(path):
                os.unlink(path)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as version_file:
            version_file.write((state.get('version') or
                                releases.DEFAULT_VERSION) + '\n')

    def use_ceph(self, ceph_conf: str) -> None:
        """Map real images of the cluster of *ceph_conf* (rbd-fuse+loop).

        krbd's sysfs then reports that cluster's fsid.
        """
        from cas_standin import rbd_ceph
        rbd_ceph.set_conf(self.state_dir, ceph_conf)
        parser = configparser.ConfigParser()
        parser.read(ceph_conf)
        fsid = parser.get('global', 'fsid', fallback=None)
        self._update(rbd_backend='ceph',
                     cluster_fsid=fsid or state_mod.SIMULATED_FSID)

    @property
    def sysfs_root(self) -> str:
        """This host's stand-in for /sys/bus/rbd/devices."""
        return rbd.sysfs_root(self.state_dir, self.state())

    def set_sysfs_root(self, path: str) -> None:
        """Publish krbd's sysfs files under *path* (hosts may share one)."""
        self._update(sysfs_root=path)

    def by_id_link(self, pool: str, image: str, namespace: str = '') -> str:
        """The by-id link the os-brick-cas udev rule names for an image."""
        return rbd.udev_link(self.state(), '%s/%s' % (
            pool, '%s/%s' % (namespace, image) if namespace else image))

    def set_udev_by_id(self, enabled: bool) -> None:
        self._update(udev_by_id=enabled)

    def set_udev_loader(self, enabled: bool, lag: int = 0) -> None:
        """Run Open CAS's udev loader (:mod:`.udev`).

        Listed cores are try-added as soon as their by-id link appears, or
        *lag* stand-in commands later.
        """
        self._update(udev_loader=enabled, udev_loader_lag=lag)

    def set_version(self, release: Optional[str]) -> None:
        """The Open CAS release ``casadm -V`` reports (None: 26.03.2).

        Before v24.9 per-core flush is ``-E``; ``-F`` takes no ``-j``.
        Columns and messages follow :mod:`.releases` (v24.9, v25.12,
        v26.03; a version containing "master": open-cas-linux master).
        """
        self._update(version=release)

    def set_latency(self, milliseconds: float) -> None:
        self._update(latency_ms=milliseconds)

    def set_flush_speed(self, ms_per_block: float) -> None:
        self._update(flush_ms_per_block=ms_per_block)

    def set_flush_steps(self, steps: int) -> None:
        """Write a slow flush back in *steps* parts (default 1: at the end).

        With more, ``casadm -P`` sees the dirty count fall during the
        flush and an interrupted flush keeps only what it had not written.
        """
        self._update(flush_steps=steps)

    def set_opencas_conf(self, path: Optional[str]) -> None:
        """The file a reboot reads to know which caches/cores come back."""
        self._update(opencas_conf=path)

    def set_module_loaded(self, loaded: bool) -> None:
        self._update(module_loaded=loaded)

    def set_open(self, path: str, is_open: bool = True) -> None:
        """Mark a device as held open (e.g. by QEMU)."""
        with state_mod.locked(self.state_dir) as state:
            if is_open and path not in state['open']:
                state['open'].append(path)
            elif not is_open and path in state['open']:
                state['open'].remove(path)

    def create_image(self, pool: str, image: str, size_mb: int = 16) -> None:
        with state_mod.locked(self.state_dir) as state:
            state['images']['%s/%s' % (pool, image)] = size_mb * 2 ** 20

    def inject_fault(self, verb: str, exit_code: int = 1, stdout: str = '',
                     stderr: str = '', hang: Optional[float] = None,
                     nth: int = 1, count: int = 1) -> None:
        """Calls nth .. nth+count-1 of *verb* (counted from now) fail."""
        with state_mod.locked(self.state_dir) as state:
            faults.add(state, verb, exit_code=exit_code, stdout=stdout,
                       stderr=stderr, hang=hang, nth=nth, count=count)

    def clear_faults(self) -> None:
        """Drop every injected fault not played yet (calls run normally)."""
        self._update(faults=[])

    def fail_remove_second_flush(self, dirty_left: int) -> None:
        """The next -R's second flush fails, *dirty_left* blocks stay."""
        self._update(remove_second_flush_fails=dirty_left)

    def stop_cache_before(self, verb: str, cache_id: int) -> None:
        """Stop *cache_id* (as ``-T -n``) right before the next *verb*."""
        self._update(stop_before={'verb': verb, 'cache_id': cache_id})

    def set_flushing(self, cache_id: int,
                     percent: Optional[float] = None) -> None:
        """Show a whole-cache flush at *percent* in ``-L`` (None: done)."""
        with state_mod.locked(self.state_dir) as state:
            state['caches'][str(cache_id)]['flushing'] = percent

    def set_dirty(self, cache_id: int, core_id: int, blocks: int) -> None:
        """Simulate guest writes that are in the cache but not in Ceph."""
        with state_mod.locked(self.state_dir) as state:
            if datatrue.enabled(state):
                raise ValueError('a data-true host counts dirty lines '
                                 'itself: write through /dev/casX-Y')
            cache = state['caches'][str(cache_id)]
            if blocks and cache['mode'] not in ('wb', 'wo'):
                raise ValueError('a %s cache never holds dirty data'
                                 % cache['mode'])
            core = cache['cores'][str(core_id)]
            if not blocks:
                core.pop('dirty_since', None)
            elif not core['dirty']:
                core['dirty_since'] = state.get('now') or time.time()
            core['dirty'] = blocks
            core['write_total'] += blocks
            core['write_hits'] += blocks

    def advance_clock(self, seconds: float = 0) -> None:
        """Stop the host's clock (as read by "Dirty for"), move it on."""
        with state_mod.locked(self.state_dir) as state:
            state['now'] = (state.get('now') or time.time()) + seconds

    def record_reads(self, cache_id: int, core_id: int, total: int,
                     hits: int) -> None:
        with state_mod.locked(self.state_dir) as state:
            core = state['caches'][str(cache_id)]['cores'][str(core_id)]
            core['read_total'] += total
            core['read_hits'] += hits
            core['clean'] += total - hits

    def reboot(self, not_started: Iterable[int] = (),
               lost_cache_devices: Iterable[int] = ()) -> None:
        """Power-cycle the host as Open CAS and krbd experience it.

        krbd mappings and every /dev entry vanish. Caches listed in
        opencas.conf [caches] are loaded again (all if no file is set); a
        loaded cache keeps every core in its metadata, inactive (with its
        dirty data) until the device is added back, so it comes up
        Incomplete. Caches not listed are not started. Caches in
        *not_started* did not load (casctl not run yet): they keep their
        metadata for :meth:`load_cache`.

        On a data-true host the cache files of *lost_cache_devices* are
        destroyed while the power is off (the "SSD died"): such an instance
        does not load, and the boot log (``state()['boot_log']``) says how
        many dirty lines were lost.
        """
        with state_mod.locked(self.state_dir) as state:
            if datatrue.enabled(state):
                datatrue.stop_all(self.state_dir, state)
                for cache_id in lost_cache_devices:
                    datatrue.destroy_cache_file(self.state_dir, cache_id)
            backend = None
            if state['rbd_backend'] == 'ceph':
                from cas_standin import rbd_ceph as backend
            for mapping in state['mappings'].values():
                if backend and mapping.get('loop'):
                    pool, image = mapping['image'].split('/', 1)
                    backend.unmap_image(self.state_dir, pool, image,
                                        mapping['loop'])
            for number in state['mappings']:
                rbd.remove_sysfs(self.state_dir, state, number)
            # /dev is rebuilt at boot: no by-id link to a mapping survives
            for link in glob.glob(os.path.join(devices.BY_ID, 'rbd-*')):
                if os.path.realpath(link) in state['devices']:
                    os.unlink(link)
            state['mappings'] = {}
            state['devices'] = {}
            state['open'] = []
            devices.remove_all(state)
            listed = None
            if state['opencas_conf']:
                listed = opencas_conf.read(state['opencas_conf']).caches
            for cache_id in list(state['caches']):
                if listed is not None and int(cache_id) not in listed:
                    del state['caches'][cache_id]
                    continue
                lost = datatrue.enabled(state) and datatrue.check_at_load(
                    self.state_dir, int(cache_id))
                if lost:
                    state.setdefault('boot_log', []).append(
                        'Failed to load cache %s: %s' % (cache_id, lost))
                    del state['caches'][cache_id]
                    continue
                cache = state['caches'][cache_id]
                for core in cache['cores'].values():
                    core['status'] = 'Inactive'
                    core.pop('resolved', None)
                cache['status'] = 'Incomplete' if cache['cores'] else \
                    'Running'
            for cache_id in not_started:
                stopped = state['caches'].pop(str(cache_id))
                state.setdefault('unloaded_caches', {})[str(cache_id)] = \
                    stopped

    def load_cache(self, cache_id: int) -> None:
        """Load a cache :meth:`reboot` left stopped, with its metadata."""
        with state_mod.locked(self.state_dir) as state:
            state['caches'][str(cache_id)] = state['unloaded_caches'].pop(
                str(cache_id))

    def state(self) -> dict[str, Any]:
        return state_mod.read(self.state_dir)

    def calls(self, tool: Optional[str] = None,
              verb: Optional[str] = None) -> list[dict[str, Any]]:
        return [call for call in state_mod.calls(self.state_dir)
                if (tool is None or call['tool'] == tool) and
                (verb is None or call['verb'] == verb)]

    def dev_entries(self) -> list[str]:
        return sorted(self.state()['created'])

    def destroy(self) -> None:
        """Unmap and remove every /dev entry this host created."""
        try:
            with state_mod.locked(self.state_dir) as state:
                if datatrue.enabled(state):
                    datatrue.stop_all(self.state_dir, state)
                if state['rbd_backend'] == 'ceph':
                    from cas_standin import rbd_ceph
                    for mapping in state['mappings'].values():
                        pool, image = mapping['image'].split('/', 1)
                        if mapping.get('loop'):
                            rbd_ceph.unmap_image(self.state_dir, pool, image,
                                                 mapping['loop'])
                for number in state['mappings']:
                    rbd.remove_sysfs(self.state_dir, state, number)
                state['mappings'] = {}
                devices.remove_all(state)
        except FileNotFoundError:
            pass
