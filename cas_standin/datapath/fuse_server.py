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

"""Serve one cache instance's cores as FUSE files, for loop devices on top.

The mount holds ``core-<id>`` per attached core (the exported object's
bytes, through the engine), ``ctl`` (write a command to act, see
:meth:`CacheFS._control`) and ``stats`` (read: the engine's counters as
JSON). Run as ``python -m cas_standin.datapath.fuse_server``;
the process ends on unmount, leaving dirty lines in the cache file (what a
reboot does).
"""

import argparse
import errno
import json
import os
import stat

import mfusepy

from cas_standin.datapath import engine as eng


def device_size(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def stats_of(engine: eng.CacheEngine) -> dict:
    """Counters of the instance and of each core that has lines/counters."""
    cores = {}
    for core_id in set(engine.cores) | {k[0] for k in engine.map} | set(
            engine.core_stats):
        counters = engine.core_stats[core_id].as_dict()
        counters.update(occupancy=engine.occupancy(core_id),
                        dirty=engine.dirty_lines(core_id),
                        active=core_id in engine.cores)
        cores[str(core_id)] = counters
    total = engine.stats.as_dict()
    total.update(occupancy=engine.occupancy(), dirty=engine.dirty_lines())
    return {'lines': engine.lines, 'mode': engine.mode, 'total': total,
            'cores': cores}


class CacheFS(mfusepy.Operations):
    """The files of one cache instance."""

    use_ns = True

    def __init__(self, engine: eng.CacheEngine):
        self.engine = engine
        self.sizes: dict[int, int] = {}     # core id -> exported size
        self.last_error = ''

    def _stats(self) -> bytes:
        counters = stats_of(self.engine)
        counters['last_error'] = self.last_error
        return json.dumps(counters).encode() + b'\n'

    def _core_id(self, path: str) -> int:
        name = path.lstrip('/')
        if name.startswith('core-') and name[5:].isdigit():
            core_id = int(name[5:])
            if core_id in self.sizes:
                return core_id
        raise mfusepy.FuseOSError(errno.ENOENT)

    def getattr(self, path, fh=None):
        if path == '/':
            return {'st_mode': stat.S_IFDIR | 0o755, 'st_nlink': 2}
        if path == '/ctl':
            size = 0
        elif path == '/stats':
            size = len(self._stats())
        else:
            size = self.sizes[self._core_id(path)]
        return {'st_mode': stat.S_IFREG | 0o600, 'st_nlink': 1,
                'st_size': size}

    def readdir(self, path, fh):
        return ['.', '..', 'ctl', 'stats'] + [
            'core-%d' % core_id for core_id in sorted(self.sizes)]

    def open(self, path, flags):
        return 0

    def truncate(self, path, length, fh=None):
        return 0

    def read(self, path, size, offset, fh):
        if path == '/stats':
            return self._stats()[offset:offset + size]
        core_id = self._core_id(path)
        size = max(0, min(size, self.sizes[core_id] - offset))
        if not size:
            return b''
        try:
            return self.engine.read(core_id, offset, size)
        except (OSError, eng.CoreInactive) as exc:
            raise mfusepy.FuseOSError(getattr(exc, 'errno', None) or
                                      errno.EIO)

    def write(self, path, data, offset, fh):
        if path == '/ctl':
            self._control(bytes(data).decode().strip())
            return len(data)
        core_id = self._core_id(path)
        try:
            self.engine.write(core_id, offset, bytes(data))
        except (OSError, eng.CoreInactive) as exc:
            raise mfusepy.FuseOSError(getattr(exc, 'errno', None) or
                                      errno.EIO)
        return len(data)

    def _control(self, command: str) -> None:
        """Run one command of the instance.

        ``attach N PATH``, ``flush [N]``, ``remove N``, ``detach N``,
        ``drop N``, ``mode M``, ``ioclass <json rows>``.
        """
        verb, _, arg = command.partition(' ')
        try:
            if verb == 'attach':
                core_id, path = arg.split(' ', 1)
                self.engine.attach_core(int(core_id), path)
                self.sizes[int(core_id)] = device_size(path)
            elif verb == 'flush':
                self.engine.flush(int(arg) if arg else None)
            elif verb in ('remove', 'detach', 'drop'):
                core_id = int(arg)
                self.sizes.pop(core_id, None)
                try:
                    {'remove': self.engine.remove_core,
                     'detach': self.engine.detach_core,
                     'drop': self.engine.drop_core}[verb](core_id)
                except Exception:
                    # a failed removal leaves the core detached, its dirty
                    # lines kept (Inactive), as Open CAS's -R phase two does
                    if core_id in self.engine.cores:
                        self.engine.detach_core(core_id)
                    raise
            elif verb == 'mode':
                self.engine.set_mode(arg)
            elif verb == 'ioclass':
                self.engine.load_io_classes(
                    [eng.IoClass(*row) for row in json.loads(arg)])
            else:
                raise ValueError('unknown control verb %r' % verb)
        except (OSError, ValueError, RuntimeError, KeyError,
                eng.CoreInactive) as exc:
            self.last_error = str(exc)
            raise mfusepy.FuseOSError(errno.EIO)
        self.last_error = ''


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--cache-file', required=True)
    parser.add_argument('--lines', type=int, default=4096)
    parser.add_argument('--mode', default='wt', choices=eng.MODES)
    parser.add_argument('--load', action='store_true',
                        help='load the cache file (after a reboot)')
    parser.add_argument('--mountpoint', required=True)
    args = parser.parse_args(argv)
    if args.load:
        engine = eng.CacheEngine.load(args.cache_file)
        engine.mode = args.mode
    else:
        engine = eng.CacheEngine(args.cache_file, args.lines, args.mode)
        engine.create()
    try:
        mfusepy.FUSE(CacheFS(engine), args.mountpoint, foreground=True,
                     nothreads=True, direct_io=True)
    finally:
        engine.save()
        engine.close()


if __name__ == '__main__':
    main()
