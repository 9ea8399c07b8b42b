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

"""One librbd client in its own process: a stand-in for one host.

Run as a script (``python rbd_client.py CONF POOL IMAGE``). It connects
its own rados client (own address, own instance id), opens the image
read-write and then answers one JSON request per stdin line with one JSON
reply per stdout line::

    {"op": "write", "offset": 0, "length": 4096, "byte": 65}
    {"op": "read", "offset": 0, "length": 4096}     -> sha256 of the bytes
    {"op": "owner"}                                 -> exclusive-lock owner?
    {"op": "lock_acquire"}      -> take the exclusive lock and keep it
    {"op": "quit"}

A failed librbd call is a reply too (``ok: false`` with the exception's
class, errno and text), so the test sees exactly what librbd returned.
"""

import hashlib
import json
import sys
import time
from typing import Any


def _serve(conf: str, pool: str, image_name: str) -> None:
    import rados
    import rbd

    cluster = rados.Rados(conffile=conf)
    cluster.connect(timeout=20)
    ioctx = cluster.open_ioctx(pool)
    image = rbd.Image(ioctx, image_name)
    _reply({'ok': True, 'op': 'open', 'addrs': cluster.get_addrs(),
            'instance_id': cluster.get_instance_id()})
    for line in sys.stdin:
        request = json.loads(line)
        started = time.monotonic()
        try:
            result = _handle(image, request)
        except Exception as exc:  # every librbd error goes back as data
            result = {'ok': False, 'error': type(exc).__name__,
                      'errno': getattr(exc, 'errno', None),
                      'message': str(exc)}
        result.setdefault('ok', True)
        result['op'] = request['op']
        result['seconds'] = round(time.monotonic() - started, 2)
        _reply(result)
        if request['op'] == 'quit':
            break
    image.close()
    ioctx.close()
    cluster.shutdown()


def _handle(image: Any, request: dict) -> dict:
    op = request['op']
    if op == 'write':
        data = bytes([request['byte']]) * request['length']
        image.write(data, request['offset'])
        image.flush()       # through librbd's cache to the OSD
        return {}
    if op == 'read':
        data = image.read(request['offset'], request['length'])
        return {'sha256': hashlib.sha256(data).hexdigest()}
    if op == 'owner':
        return {'owner': image.is_exclusive_lock_owner()}
    if op == 'lock_acquire':
        import rbd
        image.lock_acquire(rbd.RBD_LOCK_MODE_EXCLUSIVE)
        return {}
    if op == 'quit':
        return {}
    raise ValueError('unknown op %r' % op)


def _reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + '\n')
    sys.stdout.flush()


if __name__ == '__main__':
    _serve(*sys.argv[1:4])
