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

"""krbd stand-in backend that maps real RBD images of a real cluster.

No krbd here: ``rbd map`` of the stand-in runs one ``rbd-fuse`` per image
(a whole-pool mount would keep every image open and block ``rbd rm``) and
puts a loop device with direct I/O over the image file, so the device
handed out reads and writes the real image in Ceph. ``unmap`` detaches the
loop device, then unmounts.
"""

import os
import subprocess
import time

from cas_standin import ceph_cluster

CONF_FILE = 'ceph.conf.path'


def set_conf(state_dir: str, ceph_conf: str) -> None:
    """Point the stand-in at a cluster's ceph.conf."""
    with open(os.path.join(state_dir, CONF_FILE), 'w') as marker:
        marker.write(ceph_conf)


def _conf(state_dir: str) -> str:
    with open(os.path.join(state_dir, CONF_FILE)) as marker:
        return marker.read().strip()


def _mountpoint(state_dir: str, pool: str, image: str) -> str:
    return os.path.join(state_dir, 'fuse', pool, image)


def image_exists(state_dir: str, pool: str, image: str) -> bool:
    done = subprocess.run([ceph_cluster.real_rbd(), '-c', _conf(state_dir),
                           'info', '%s/%s' % (pool, image)],
                          capture_output=True, timeout=60)
    return done.returncode == 0


def map_image(state_dir: str, pool: str, image: str) -> str:
    """Expose *pool/image* as a loop device; return its path."""
    mountpoint = _mountpoint(state_dir, pool, image)
    os.makedirs(mountpoint, exist_ok=True)
    ceph_cluster.run('rbd-fuse', '-c', _conf(state_dir), '-p', pool, '-r',
                     image, mountpoint)
    image_file = os.path.join(mountpoint, image)
    end = time.monotonic() + 10
    while not os.path.exists(image_file):
        if time.monotonic() > end:
            _unmount(mountpoint)
            raise RuntimeError('rbd-fuse did not expose %s' % image_file)
        time.sleep(0.05)
    try:
        return ceph_cluster.run('losetup', '--find', '--show',
                                '--direct-io=on', image_file).strip()
    except Exception:
        _unmount(mountpoint)
        raise


def _unmount(mountpoint: str) -> None:
    for _attempt in range(50):
        done = subprocess.run(['fusermount', '-u', mountpoint],
                              capture_output=True, timeout=30)
        if done.returncode == 0 or not os.path.ismount(mountpoint):
            return
        time.sleep(0.1)
    raise RuntimeError('could not unmount %s' % mountpoint)


def unmap_image(state_dir: str, pool: str, image: str, loop: str) -> None:
    """Detach *loop* (never all loop devices), then unmount rbd-fuse."""
    subprocess.run(['losetup', '-d', loop], capture_output=True, timeout=30)
    end = time.monotonic() + 10
    while time.monotonic() < end and _loop_attached(loop):
        time.sleep(0.05)
    _unmount(_mountpoint(state_dir, pool, image))


def _loop_attached(loop: str) -> bool:
    done = subprocess.run(['losetup', loop], capture_output=True)
    return done.returncode == 0
