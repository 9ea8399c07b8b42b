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
from os_brick_cas import rbd_names
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
    namespace: str = ''
    cluster_fsid: Optional[str] = None
    #: this attachment (``cas_epoch``), when the caller tracks ownership
    epoch: Optional[str] = None
    #: the attachment Cinder names as owner of the volume's newest cached
    #: data on this host (``cas_owner_epoch``): '' if none here, None if
    #: the caller does not know (no ownership checks then)
    owner_epoch: Optional[str] = None
    #: the volume's cap in whole percent of its cache instance
    #: (``cache_share``, from the type's ``cas:cache_share``), or None
    share: Optional[int] = None

    @property
    def label(self) -> str:
        """How logs and errors name the volume."""
        return '%s (%s)' % (self.volume_id, self.spec.path)

    @property
    def spec(self) -> rbd_names.ImageSpec:
        """The image, as links and krbd's sysfs name it."""
        return rbd_names.ImageSpec(pool=self.pool, namespace=self.namespace,
                                   image=self.image, fsid=self.cluster_fsid)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return strutils.bool_from_string(value.replace('<is>', '').strip(),
                                         strict=True)
    raise ValueError(value)


def is_cacheable(props: Any) -> bool:
    """Whether connection data asks for a cache (lenient: False if odd).

    Decides only which code path a volume takes; a cacheable volume is
    then validated strictly by :func:`from_connection_properties`.
    """
    if not isinstance(props, dict):
        return False
    try:
        return _flag(props.get('cacheable', False))
    except ValueError:
        return True     # let strict validation say what is wrong


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
    if not isinstance(name, str) or name.count('/') not in (1, 2):
        raise exception.InvalidConnectionInfo(
            volume=volume_id, reason="'name' must be 'pool/image' or "
                                     "'pool/namespace/image', got %r"
                                     % (name,))
    parts = name.split('/')
    pool, image = parts[0], parts[-1]
    namespace = parts[1] if len(parts) == 3 else ''
    fsid = props.get('cluster_fsid')
    try:
        validation.rbd_name('pool', pool)
        validation.rbd_name('namespace', namespace, allow_empty=True)
        validation.rbd_name('image', image)
        if fsid is not None:
            fsid = validation.cluster_fsid(fsid)
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
    share = props.get('cache_share')
    if share is not None:
        try:
            share = validation.cache_share(share)
        except exception.InvalidInput as exc:
            raise exception.InvalidConnectionInfo(volume=volume_id,
                                                  reason=str(exc))
    epoch = props.get('cas_epoch')
    owner_epoch = props.get('cas_owner_epoch')
    try:
        if epoch is not None:
            epoch = validation.epoch(epoch)
        if owner_epoch not in (None, ''):
            owner_epoch = validation.epoch(owner_epoch)
    except exception.InvalidInput as exc:
        raise exception.InvalidConnectionInfo(volume=volume_id,
                                              reason=str(exc))
    return RBDVolume(pool=pool, image=image, cacheable=cacheable, mode=mode,
                     volume_id=volume_id, namespace=namespace,
                     cluster_fsid=fsid, epoch=epoch, owner_epoch=owner_epoch,
                     share=share if cacheable else None)
