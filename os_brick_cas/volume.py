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

"""What a cached RBD volume is, read from Cinder's connection data."""

import dataclasses
from typing import Any, Optional

from oslo_utils import strutils

from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas import validation

#: Mode used when a volume type says cacheable but names no mode: the one
#: that can never hold dirty data (what upstream's design allowed).
DEFAULT_MODE = modes.CacheMode.WRITE_THROUGH


@dataclasses.dataclass(frozen=True)
class RBDVolume:
    pool: str
    image: str
    cacheable: bool
    mode: Optional[modes.CacheMode]
    volume_id: str

    @property
    def label(self) -> str:
        """How logs and errors name the volume."""
        return '%s (%s/%s)' % (self.volume_id, self.pool, self.image)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return strutils.bool_from_string(value.replace('<is>', '').strip(),
                                         strict=True)
    raise ValueError(value)


def from_connection_properties(props: Any) -> RBDVolume:
    """Validate ``connection_info['data']`` of an rbd volume.

    Raises InvalidConnectionInfo before anything runs on the host.
    """
    if not isinstance(props, dict):
        raise exception.InvalidConnectionInfo(
            volume='?',
            reason='expected a dict, got %s' % type(props).__name__)
    volume_id = str(props.get('volume_id') or props.get('name') or '?')
    name = props.get('name')
    if not isinstance(name, str) or name.count('/') != 1:
        raise exception.InvalidConnectionInfo(
            volume=volume_id, reason="'name' must be 'pool/image', got %r"
                                     % (name,))
    pool, image = name.split('/')
    try:
        validation.rbd_name('pool', pool)
        validation.rbd_name('image', image)
    except exception.InvalidInput as exc:
        raise exception.InvalidConnectionInfo(volume=volume_id,
                                              reason=str(exc))
    try:
        cacheable = _flag(props.get('cacheable', False))
    except ValueError:
        raise exception.InvalidConnectionInfo(
            volume=volume_id, reason="'cacheable' must be a boolean, got %r"
                                     % (props.get('cacheable'),))
    mode = None
    if cacheable:
        raw_mode = props.get('cache_mode') or DEFAULT_MODE.value
        try:
            mode = validation.cache_mode(raw_mode)
        except exception.InvalidInput as exc:
            raise exception.InvalidConnectionInfo(volume=volume_id,
                                                  reason=str(exc))
    return RBDVolume(pool=pool, image=image, cacheable=cacheable, mode=mode,
                     volume_id=volume_id)
