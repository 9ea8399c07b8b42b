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

"""The real Ceph cluster of the test tiers, and librbd on it.

No cinder import: tests/ceph (cinder's RBD driver) and tests/ceph_nova
(nova's compute manager) share it and cannot share one process. The
cluster is cas_standin.ceph_cluster; images are made and read
with the python rados/rbd bindings.
"""

import atexit
import contextlib
import hashlib
import os
import time
from typing import Any, Iterator, Optional

from cas_standin import ceph_cluster

POOL = 'volumes'
MIB = 2 ** 20

_CLUSTER: Optional[ceph_cluster.CephCluster] = None


def why_not() -> Optional[str]:
    """Why this tier cannot run on this machine (None if it can)."""
    if os.geteuid() != 0:
        return 'needs root (loop devices, FUSE, /dev entries)'
    missing = ceph_cluster.missing_tools()
    if missing:
        return ('Ceph tools missing: %s (tools/install-ceph.sh installs '
                'them)' % ', '.join(missing))
    if not os.path.exists('/dev/fuse'):
        return '/dev/fuse is missing'
    try:
        import rados  # noqa: F401
        import rbd  # noqa: F401
    except ImportError as exc:
        return 'python rados/rbd bindings missing (%s)' % exc
    return None


def skip_or_fail(test: Any) -> None:
    """Skip *test* if the tier cannot run, fail instead when CI needs it."""
    reason = why_not()
    if reason:
        if os.environ.get('OS_BRICK_CAS_REQUIRE_CEPH') == '1':
            test.fail('real-Ceph tier required but: %s' % reason)
        test.skipTest(reason)


def shared_cluster() -> ceph_cluster.CephCluster:
    """One cluster for the whole test process, stopped by pid at exit."""
    global _CLUSTER
    if _CLUSTER is None:
        cluster = ceph_cluster.CephCluster(pool=POOL)
        cluster.setUp()     # cleans up after itself if it fails
        atexit.register(cluster.cleanUp)
        _CLUSTER = cluster
    return _CLUSTER


@contextlib.contextmanager
def _ioctx(conf: str) -> Iterator[Any]:
    import rados
    with rados.Rados(conffile=conf) as client, \
            client.open_ioctx(POOL) as ioctx:
        yield ioctx


def create_image(conf: str, image: str, size: int) -> None:
    """A new RBD image of *size* bytes in the pool, made by librbd."""
    import rbd
    with _ioctx(conf) as ioctx:
        rbd.RBD().create(ioctx, image, size)


def remove_image(conf: str, image: str) -> None:
    import rbd
    with _ioctx(conf) as ioctx:
        rbd.RBD().remove(ioctx, image)


def remove_every_image(conf: str, attempts: int = 20) -> list[str]:
    """Remove every image of the pool over one connection.

    An image a krbd client has just unmapped may keep its watch for a
    moment (ImageBusy): that removal is retried, up to *attempts* times
    half a second apart. Returns the images still there.
    """
    import rbd
    with _ioctx(conf) as ioctx:
        left = rbd.RBD().list(ioctx)
        for _attempt in range(attempts):
            busy = []
            for image in left:
                try:
                    rbd.RBD().remove(ioctx, image)
                except rbd.ImageNotFound:
                    pass
                except rbd.ImageBusy:
                    busy.append(image)
            left = busy
            if not left:
                break
            time.sleep(0.5)
        return left


def read(conf: str, image: str, offset: int, length: int) -> bytes:
    """What librbd reads from the cluster (read-only open)."""
    [data] = read_ranges(conf, image, [(offset, length)])
    return data


def read_ranges(conf: str, image: str,
                ranges: list[tuple[int, int]]) -> list[bytes]:
    """What librbd reads at each (offset, length), over one connection.

    A connection costs about a second under TCG: a check of many ranges
    reads them all through one.
    """
    import rbd
    with _ioctx(conf) as ioctx, \
            rbd.Image(ioctx, image, read_only=True) as img:
        return [img.read(offset, length) for offset, length in ranges]


def digest(conf: str, image: str, offset: int, length: int) -> str:
    """sha256 of what librbd reads from the cluster (read-only open)."""
    return hashlib.sha256(read(conf, image, offset, length)).hexdigest()
