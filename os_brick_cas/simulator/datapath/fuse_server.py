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

"""Serve one cached core as a FUSE file, for a loop device on top.

The mount holds ``disk`` (the exported object's bytes, through the
engine), ``ctl`` (write ``flush``, ``remove`` or ``ioclass <json>`` to
act) and ``stats`` (read: the engine's counters as JSON). Run as
``python -m os_brick_cas.simulator.datapath.fuse_server ...``; the process
ends on unmount, leaving dirty lines in the cache file (a "reboot").
"""

import argparse
import errno
import json
import os
import stat

import mfusepy

from os_brick_cas.simulator.datapath import engine as eng


class CachedCoreFS(mfusepy.Operations):
    """The three files of one exported object."""

    use_ns = True

    def __init__(self, engine: eng.CacheEngine, core_id: int, size: int):
        self.engine = engine
        self.core_id = core_id
        self.size = size
        self.last_error = ''

    def _stats(self) -> bytes:
        counters = self.engine.stats.as_dict()
        counters.update(occupancy=self.engine.occupancy(self.core_id),
                        dirty=self.engine.dirty_lines(self.core_id),
                        lines=self.engine.lines, mode=self.engine.mode,
                        last_error=self.last_error)
        return json.dumps(counters).encode() + b'\n'

    def getattr(self, path, fh=None):
        if path == '/':
            return {'st_mode': stat.S_IFDIR | 0o755, 'st_nlink': 2}
        sizes = {'/disk': self.size, '/ctl': 0,
                 '/stats': len(self._stats())}
        if path not in sizes:
            raise mfusepy.FuseOSError(errno.ENOENT)
        return {'st_mode': stat.S_IFREG | 0o600, 'st_nlink': 1,
                'st_size': sizes[path]}

    def readdir(self, path, fh):
        return ['.', '..', 'disk', 'ctl', 'stats']

    def open(self, path, flags):
        return 0

    def truncate(self, path, length, fh=None):
        return 0

    def read(self, path, size, offset, fh):
        if path == '/stats':
            return self._stats()[offset:offset + size]
        size = max(0, min(size, self.size - offset))
        if not size:
            return b''
        try:
            return self.engine.read(self.core_id, offset, size)
        except OSError as exc:
            raise mfusepy.FuseOSError(exc.errno or errno.EIO)

    def write(self, path, data, offset, fh):
        if path == '/ctl':
            return self._control(data.decode().strip()) or len(data)
        try:
            self.engine.write(self.core_id, offset, bytes(data))
        except OSError as exc:
            raise mfusepy.FuseOSError(exc.errno or errno.EIO)
        return len(data)

    def _control(self, command: str) -> None:
        verb, _, arg = command.partition(' ')
        try:
            if verb == 'flush':
                self.engine.flush(self.core_id)
            elif verb == 'remove':
                self.engine.remove_core(self.core_id)
            elif verb == 'ioclass':
                self.engine.load_io_classes(
                    [eng.IoClass(*row) for row in json.loads(arg)])
            else:
                raise ValueError('unknown control verb %r' % verb)
        except (OSError, ValueError, RuntimeError) as exc:
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
    parser.add_argument('--core-id', type=int, required=True)
    parser.add_argument('--core', required=True)
    parser.add_argument('--mountpoint', required=True)
    args = parser.parse_args(argv)
    if args.load:
        engine = eng.CacheEngine.load(args.cache_file)
    else:
        engine = eng.CacheEngine(args.cache_file, args.lines, args.mode)
        engine.create()
    engine.attach_core(args.core_id, args.core)
    fd = os.open(args.core, os.O_RDONLY)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
    ops = CachedCoreFS(engine, args.core_id, size)
    try:
        mfusepy.FUSE(ops, args.mountpoint, foreground=True, nothreads=True,
                     direct_io=True)
    finally:
        engine.save()
        engine.close()


if __name__ == '__main__':
    main()
