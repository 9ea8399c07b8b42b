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

"""Privileged changes to /dev links and to /etc/opencas/opencas.conf."""

import os

from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas.opencas import casadm_params
from os_brick_cas.opencas import opencas_conf
from os_brick_cas import opts  # noqa: F401  (registers [os_brick_cas])
from os_brick_cas import ownership
from os_brick_cas import privileged
from os_brick_cas import rbd_names
from os_brick_cas import share_asks
from os_brick_cas import shared_files
from os_brick_cas import validation

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def _check_link_target(link: str, target: str) -> None:
    """Refuse unless krbd says *target* is the image *link*'s name binds."""
    dev_id = rbd_names.device_id(target)
    mapped = rbd_names.read_sysfs(dev_id, CONF.os_brick_cas.sysfs_rbd_root)
    name = os.path.basename(link)
    named = rbd_names.parse_link_name(name)
    if mapped is None or mapped.is_snapshot:
        reason = 'krbd does not describe it as an image mapping'
    elif named is not None and named.same_image(mapped.spec) and (
            mapped.spec.fsid is not None):
        return
    else:
        reason = 'it is RBD image %s' % mapped.spec.label
    raise exception.InvalidInput(what='link target', value=target,
                                 reason='%s; %s names another image'
                                        % (reason, link))


@privileged.default.entrypoint
def link_by_id(link: str, target: str) -> None:
    """Point the rbd by-id *link* at krbd device *target*, as udev would.

    Only ``rbd-cas-…`` names (never the ambiguous 1.x ones, which Open
    CAS's udev loader could match to another image's inactive core) and
    /dev/rbdN targets, and only when krbd says the device is the image the
    link names. The link is relative
    (``../../rbd0``) and replaced atomically.
    """
    link = validation.rbd_link(link)
    if rbd_names.parse_link_name(os.path.basename(link)) is None:
        raise exception.InvalidInput(
            what='by-id link', value=link,
            reason='os-brick-cas creates only rbd-cas-... links')
    target = validation.rbd_device(target)
    if not os.path.exists(target):
        raise exception.InvalidInput(what='link target', value=target,
                                     reason='does not exist')
    _check_link_target(link, target)
    os.makedirs(validation.BY_ID_DIR, exist_ok=True)
    relative = os.path.relpath(target, validation.BY_ID_DIR)
    temporary = '%s.os-brick-cas.%d' % (link, os.getpid())
    os.symlink(relative, temporary)
    os.replace(temporary, link)


@privileged.default.entrypoint
def unlink_by_id(link: str) -> None:
    """Remove the rbd by-id *link* if it is a symlink."""
    link = validation.rbd_link(link)
    if os.path.islink(link):
        os.unlink(link)


def _conf_lock():
    path = CONF.os_brick_cas.opencas_conf
    return lockutils.InterProcessLock(path + '.os-brick-cas.lock')


@privileged.default.entrypoint
def record_core(cache_id: int, core_id: int, core_device: str) -> None:
    """List a core in opencas.conf with lazy_startup=true.

    Refused (OpenCasConfRefused) for a cache not under [caches] or a device
    already listed as another core: casctl would reject the whole file.
    """
    row = opencas_conf.CoreRow(validation.cache_id(cache_id),
                               validation.core_id(core_id),
                               validation.by_id_path(core_device))
    with _conf_lock():
        opencas_conf.update_file(CONF.os_brick_cas.opencas_conf,
                                 add=row)


@privileged.default.entrypoint
def forget_core(cache_id: int, core_id: int, core_device: str) -> None:
    """Drop the row listing *core_device* as core *core_id* of *cache_id*.

    A row for that (cache, core) naming another device is kept: the core id
    was freed and given to that device since (no-op if nothing matches).
    """
    row = opencas_conf.CoreRow(validation.cache_id(cache_id),
                               validation.core_id(core_id),
                               validation.by_id_path(core_device))
    with _conf_lock():
        opencas_conf.update_file(CONF.os_brick_cas.opencas_conf,
                                 remove=row)


#: the [caches] extra fields os-brick-cas writes, and their allowed values
_CACHE_EXTRA = {
    'cache_line_size': tuple(str(size) for size in
                             casadm_params.LINE_SIZES_KIB),
    'cleaning_policy': casadm_params.CLEANING_POLICIES,
    'promotion_policy': casadm_params.PROMOTION_POLICIES,
    'lazy_startup': ('true',),
}


def _cache_row(row: list) -> opencas_conf.CacheRow:
    cache_id, device, mode, extra = row
    fields = []
    for key, value in extra:
        if value not in _CACHE_EXTRA.get(key, ()):
            raise exception.InvalidInput(
                what='opencas.conf field %s' % key, value=value,
                reason='not a field os-brick-cas writes')
        fields.append((key, value))
    return opencas_conf.CacheRow(validation.cache_id(cache_id),
                                 validation.cache_device(device),
                                 validation.cache_mode(mode).value,
                                 tuple(fields))


@privileged.default.entrypoint
def record_caches(rows: list[list]) -> bool:
    """Write these ``[caches]`` rows (id, device, mode, [(key, value)]).

    Every [cores] row and other cache ids' rows stay as they are. Returns
    whether the file changed.
    """
    caches = [_cache_row(list(row)) for row in rows]
    with _conf_lock():
        return opencas_conf.update_caches_file(
            CONF.os_brick_cas.opencas_conf, caches)


@privileged.default.entrypoint
def forget_caches(cache_ids: list[int]) -> bool:
    """Drop the [caches] and [cores] rows of these stopped instances.

    Returns whether the file changed (no-op for ids it does not list).
    """
    ids = [validation.cache_id(cache_id) for cache_id in cache_ids]
    with _conf_lock():
        return opencas_conf.forget_caches_file(
            CONF.os_brick_cas.opencas_conf, ids)


@privileged.default.entrypoint
def record_owner(link: str, epoch: str, cache_id: int, core_id: int) -> None:
    """Record that the core added as *link* caches attachment *epoch*."""
    record = ownership.OwnerRecord(
        link=validation.rbd_link(link), epoch=validation.epoch(epoch),
        cache_id=validation.cache_id(cache_id),
        core_id=validation.core_id(core_id))
    path = ownership.record_path(record.link)
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    temporary = '%s.tmp.%d' % (path, os.getpid())
    with open(temporary, 'w') as record_file:
        record_file.write(ownership.encode(record))
        record_file.flush()
        os.fsync(record_file.fileno())
    os.replace(temporary, path)
    directory = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@privileged.default.entrypoint
def forget_owner(link: str, cache_id: int, core_id: int) -> None:
    """Drop the record of *link* if it still names that core."""
    link = validation.rbd_link(link)
    record = ownership.read(link)
    if record is not None and record.names_core(
            validation.cache_id(cache_id), validation.core_id(core_id)):
        os.unlink(ownership.record_path(link))


@privileged.default.entrypoint
def record_share(link: str, cache_id: int, core_id: int, share: int) -> None:
    """Record that the core added as *link* asked for *share* percent."""
    ask = share_asks.ShareAsk(
        link=validation.rbd_link(link),
        cache_id=validation.cache_id(cache_id),
        core_id=validation.core_id(core_id),
        share=validation.cache_share(share))
    directory = share_asks.asks_dir()
    os.makedirs(directory, mode=0o755, exist_ok=True)
    shared_files.replace_atomically(directory, share_asks.record_name(
        ask.link), share_asks.encode(ask).encode())


@privileged.default.entrypoint
def forget_share(link: str) -> None:
    """Drop the share ask of the core added as *link* (idempotent)."""
    shared_files.remove(share_asks.asks_dir(), share_asks.record_name(link))
