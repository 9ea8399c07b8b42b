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

"""The one-node Ceph cluster of the real-kernel tier, inside the guest.

    python guest_ceph.py start DIR   # prints the cluster's ceph.conf path
    python guest_ceph.py stop DIR

The same cluster as the Ceph tier's (memstore, no cephx, loopback), left
running after ``start`` exits so krbd and the tests share it; its conf is
also installed as /etc/ceph/ceph.conf (the guest's /etc is a tmpfs
overlay), where ``rbd map`` of the product's connector finds it, as on a
compute node.
"""

import os
import shutil
import sys

from cas_standin import ceph_cluster

POOL = 'volumes'


def start(parent: str) -> str:
    os.makedirs(parent, exist_ok=True)
    os.environ['OS_BRICK_CAS_CEPH_DIR'] = parent
    cluster = ceph_cluster.CephCluster(pool=POOL, memstore_mb=768)
    cluster.setUp()     # stops what it started if it fails
    os.makedirs('/etc/ceph', exist_ok=True)
    shutil.copy(cluster.conf, '/etc/ceph/ceph.conf')
    return cluster.conf


def stop(parent: str) -> None:
    for name in os.listdir(parent):
        cluster = ceph_cluster.CephCluster(pool=POOL)
        cluster.root = os.path.join(parent, name)
        cluster.stop()


def main() -> int:
    command, parent = sys.argv[1:3]
    if command == 'start':
        print(start(parent))
    else:
        stop(parent)
    return 0


if __name__ == '__main__':
    sys.exit(main())
