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

"""Start and stop one data-true exported object: FUSE server + loop.

``start`` launches the FUSE server over a core device and puts a direct-I/O
loop device on its ``disk`` file; that loop device plays /dev/casX-Y.
``stop`` detaches the loop and unmounts, which ends the server and leaves
dirty lines in the cache file (what a host reboot does to Open CAS).
"""

import json
import os
import subprocess
import sys
import time
from typing import NamedTuple

from os_brick_cas.simulator.datapath import engine as eng


class Exported(NamedTuple):
    mountpoint: str
    loop: str
    process: subprocess.Popen


def start(cache_file: str, core: str, core_id: int, mountpoint: str,
          mode: str = 'wt', lines: int = 4096,
          load: bool = False) -> Exported:
    """Serve *core* through the cache in *cache_file*; return the loop."""
    if load:
        eng.CacheEngine.load(cache_file).close()   # CacheDeviceLost if gone
    os.makedirs(mountpoint, exist_ok=True)
    argv = [sys.executable, '-m',
            'os_brick_cas.simulator.datapath.fuse_server',
            '--cache-file', cache_file, '--core', core,
            '--core-id', str(core_id), '--mountpoint', mountpoint,
            '--mode', mode, '--lines', str(lines)] + (
                ['--load'] if load else [])
    process = subprocess.Popen(argv, stderr=subprocess.PIPE)
    disk = os.path.join(mountpoint, 'disk')
    end = time.monotonic() + 10
    while not os.path.exists(disk):
        if process.poll() is not None or time.monotonic() > end:
            process.kill()
            raise RuntimeError('cache stand-in for %s did not start: %s'
                               % (core, process.stderr.read().decode()))
        time.sleep(0.05)
    try:
        loop = subprocess.run(['losetup', '--find', '--show',
                               '--direct-io=on', disk], check=True,
                              capture_output=True, text=True).stdout.strip()
    except subprocess.CalledProcessError:
        _unmount(mountpoint, process)
        raise
    return Exported(mountpoint, loop, process)


def control(exported: Exported, command: str) -> None:
    """Send ``flush``/``remove``/``ioclass <json>``; raise with the cause."""
    try:
        with open(os.path.join(exported.mountpoint, 'ctl'), 'w') as ctl:
            ctl.write(command)
    except OSError:
        raise RuntimeError('%s failed on %s: %s' % (
            command.split()[0], exported.loop,
            stats(exported)['last_error']))


def stats(exported: Exported) -> dict:
    with open(os.path.join(exported.mountpoint, 'stats')) as f:
        return json.load(f)


def stop(exported: Exported) -> None:
    """Detach the loop (only ours) and unmount; dirty lines stay."""
    subprocess.run(['losetup', '-d', exported.loop], capture_output=True,
                   timeout=30)
    _unmount(exported.mountpoint, exported.process)


def _unmount(mountpoint: str, process: subprocess.Popen) -> None:
    for _attempt in range(50):
        subprocess.run(['fusermount', '-u', mountpoint], capture_output=True,
                       timeout=30)
        if not os.path.ismount(mountpoint):
            break
        time.sleep(0.1)
    process.wait(timeout=30)
    process.stderr.close()
