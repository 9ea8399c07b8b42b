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

"""Guest-like block I/O for the real-Ceph tier.

No cinder or nova import here: the cinder-side tests and the nova-side
helper process both use it.
"""

import hashlib
import subprocess


def write_direct(path: str, offset: int, data: bytes) -> None:
    """Write *data* at *offset* with O_DIRECT, as a guest's disk would."""
    subprocess.run(['dd', 'of=%s' % path, 'bs=64k', 'seek=%d' % offset,
                    'oflag=direct,seek_bytes', 'conv=notrunc,fsync',
                    'status=none'], input=data, check=True)


def read_direct(path: str, offset: int, length: int) -> bytes:
    """Read with O_DIRECT (bypassing the page cache)."""
    return subprocess.run(['dd', 'if=%s' % path, 'bs=64k',
                           'skip=%d' % offset, 'count=%d' % length,
                           'iflag=direct,skip_bytes,count_bytes',
                           'status=none'], capture_output=True,
                          check=True).stdout


def pattern(label: str, length: int) -> bytes:
    unit = ('os-brick-cas %s ' % label).encode()
    return (unit * (length // len(unit) + 1))[:length]


def digest(data: bytes) -> str:
    """sha256 hex digest: what the tests compare instead of raw MiBs."""
    return hashlib.sha256(data).hexdigest()
