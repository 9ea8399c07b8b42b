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

"""The monitor commands that set the one-node cluster up, in one session.

Run by the system's Python (Debian's python3-rados is not in the venv)::

    /usr/bin/python3 ceph_setup_commands.py CONF OSD_UUID POOL

It creates the osd (printing its id), places it in the CRUSH map, and
creates the pool for rbd. One client session instead of four ``ceph``
CLI runs: each of those imports the CLI and fetches the monitor's command
descriptions again, about 1 s on the host and tens of seconds in the
kernel tier's TCG guest. Stdlib and rados only.
"""

import errno
import json
import sys
import time

import rados

#: seconds to reach the young monitor, and for each command
TIMEOUT = 120
#: seconds a young monitor's EPERM refusals are retried
REFUSED_FOR = 60


def _command(cluster: 'rados.Rados', **command: object) -> bytes:
    """One monitor command; SystemExit with the monitor's words if refused.

    A monitor that has just formed its quorum refuses now and then with
    EPERM ("wrong fsid"): retried for REFUSED_FOR seconds (each command
    here is idempotent: osd new with the same uuid gives the same id).
    """
    end = time.monotonic() + REFUSED_FOR
    while True:
        code, output, status = cluster.mon_command(
            json.dumps(command), b'', timeout=TIMEOUT)
        if code != -errno.EPERM or time.monotonic() > end:
            break
        time.sleep(1)
    if code:
        raise SystemExit('ceph %s refused (%d): %s' % (
            command['prefix'], code, status))
    return output


def main(conf: str, osd_uuid: str, pool: str) -> None:
    cluster = rados.Rados(conffile=conf)
    cluster.connect(timeout=TIMEOUT)
    try:
        created = _command(cluster, prefix='osd new', uuid=osd_uuid,
                           format='json')
        osd_id = json.loads(created)['osdid']
        _command(cluster, prefix='osd crush add', id=osd_id,
                 weight=1.0, args=['host=localhost', 'root=default'])
        _command(cluster, prefix='osd pool create', pool=pool, pg_num=8)
        _command(cluster, prefix='osd pool application enable', pool=pool,
                 app='rbd')
    finally:
        cluster.shutdown()
    print(osd_id)


if __name__ == '__main__':
    main(*sys.argv[1:4])
