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

"""Start and stop a data-true cache instance and its exported objects.

An instance lives in one directory: ``ssd`` (the cache file), ``ssd.meta``,
``mnt`` (the FUSE mount of its server), ``server.log`` and ``server.pid``.
The server outlives the short-lived stand-in casadm that started it; it
ends when the mount is unmounted (``stop``), leaving dirty lines in the
cache file, which is what a host reboot does to Open CAS. Each attached
core is a file ``mnt/core-<id>`` with a direct-I/O loop device on top: the
exported object /dev/casX-Y.
"""

import json
import os
import subprocess
import sys
import time

from cas_standin.datapath import engine as eng

START_TIMEOUT = 10


class StandInError(Exception):
    """A control command failed; the message is the engine's."""


def cache_file(directory: str) -> str:
    return os.path.join(directory, 'ssd')


def mountpoint(directory: str) -> str:
    return os.path.join(directory, 'mnt')


def running(directory: str) -> bool:
    return os.path.ismount(mountpoint(directory))


def has_metadata(directory: str) -> bool:
    return os.path.exists(cache_file(directory) + '.meta')


def start(directory: str, mode: str, lines: int) -> None:
    """Run the instance's server (load its cache file if it has one).

    Raises :class:`engine.CacheDeviceLost` if the cache file it had is gone.
    """
    load = has_metadata(directory)
    if load:
        eng.CacheEngine.load(cache_file(directory)).close()
    mnt = mountpoint(directory)
    os.makedirs(mnt, exist_ok=True)
    argv = [sys.executable, '-m',
            'cas_standin.datapath.fuse_server',
            '--cache-file', cache_file(directory), '--mountpoint', mnt,
            '--mode', mode, '--lines', str(lines)] + (
                ['--load'] if load else [])
    log_path = os.path.join(directory, 'server.log')
    with open(log_path, 'ab') as log:
        process = subprocess.Popen(argv, stdout=log, stderr=log,
                                   stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    with open(os.path.join(directory, 'server.pid'), 'w') as pid_file:
        pid_file.write('%d\n' % process.pid)
    end = time.monotonic() + START_TIMEOUT
    while not os.path.exists(os.path.join(mnt, 'ctl')):
        if process.poll() is not None or time.monotonic() > end:
            if process.poll() is None:
                process.kill()
            with open(log_path, errors='replace') as log:
                raise StandInError('cache stand-in in %s did not start: %s'
                                   % (directory, log.read()[-2000:]))
        time.sleep(0.02)


def control(directory: str, command: str) -> None:
    """Send a command to the instance's server; raise with its cause."""
    try:
        with open(os.path.join(mountpoint(directory), 'ctl'), 'w') as ctl:
            ctl.write(command)
    except OSError as exc:
        cause = str(exc)
        try:
            cause = stats(directory)['last_error'] or cause
        except (OSError, ValueError):
            pass
        raise StandInError(cause)


def stats(directory: str) -> dict:
    """The running server's counters, or those the metadata implies."""
    if running(directory):
        with open(os.path.join(mountpoint(directory), 'stats')) as f:
            return json.load(f)
    meta = eng.CacheEngine.read_meta(cache_file(directory))
    cores: dict[str, dict] = {}
    for core_id, _line, _slot, dirty, _klass in meta['map']:
        core = cores.setdefault(str(core_id), dict(
            dict.fromkeys(eng.Stats.FIELDS, 0), occupancy=0, dirty=0,
            active=False))
        core['occupancy'] += 1
        core['dirty'] += int(dirty)
    total = dict.fromkeys(eng.Stats.FIELDS, 0)
    total.update(occupancy=len(meta['map']),
                 dirty=sum(1 for row in meta['map'] if row[3]))
    return {'lines': meta['lines'], 'mode': meta['mode'], 'total': total,
            'cores': cores, 'last_error': ''}


def export(directory: str, core_id: int, core_device: str) -> str:
    """Attach a core and put a direct-I/O loop on it; return the loop."""
    control(directory, 'attach %d %s' % (core_id, core_device))
    disk = os.path.join(mountpoint(directory), 'core-%d' % core_id)
    done = subprocess.run(['losetup', '--find', '--show', '--direct-io=on',
                           disk], capture_output=True, text=True,
                          timeout=30)
    if done.returncode:
        control(directory, 'detach %d' % core_id)
        raise StandInError('losetup on %s failed: %s' % (disk,
                                                         done.stderr))
    return done.stdout.strip()


def unexport(loop: str) -> None:
    """Detach the exported object's loop device (only this one)."""
    subprocess.run(['losetup', '-d', loop], capture_output=True, timeout=30)
    end = time.monotonic() + 10
    while time.monotonic() < end and subprocess.run(
            ['losetup', loop], capture_output=True).returncode == 0:
        time.sleep(0.02)


def stop(directory: str) -> None:
    """Unmount (the server ends, dirty lines stay in the cache file)."""
    mnt = mountpoint(directory)
    for _attempt in range(100):
        if not os.path.ismount(mnt):
            break
        subprocess.run(['fusermount', '-u', mnt], capture_output=True,
                       timeout=30)
        time.sleep(0.05)
    pid_path = os.path.join(directory, 'server.pid')
    try:
        with open(pid_path) as pid_file:
            pid = int(pid_file.read())
    except (OSError, ValueError):
        return
    end = time.monotonic() + 10
    while time.monotonic() < end and _alive(pid):
        time.sleep(0.02)
    os.unlink(pid_path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open('/proc/%d/stat' % pid) as stat_file:
            return stat_file.read().split(')')[-1].split()[0] != 'Z'
    except OSError:
        return False
