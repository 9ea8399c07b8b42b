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

"""What share each attached volume asked for (host-side records).

The IO-class table records only the shares it holds; a volume whose share
the class budget refused (:attr:`io_class_table.Composed.unshared`) has
no class, so the table cannot say what it asked for. One JSON file per
core, named after the core's by-id link, under ``[os_brick_cas]
state_path``/shares, written (as root, through
:mod:`os_brick_cas.privileged.devices`) when a volume with a share is
attached and removed with the core. status, doctor and the exporter read
it (no privileges needed) to tell "asked 25%, holds none".
"""

import dataclasses
import json
import os
from typing import Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas import opts
from os_brick_cas import shared_files
from os_brick_cas import validation

CONF = cfg.CONF
LOG = logging.getLogger(__name__)
#: bytes a record may have (one JSON line of four fields)
RECORD_LIMIT = 4096


@dataclasses.dataclass(frozen=True)
class ShareAsk:
    """Core *core_id* of *cache_id*, added as *link*, asked for *share*."""

    link: str
    cache_id: int
    core_id: int
    #: whole percent 1..100
    share: int


def asks_dir() -> str:
    return os.path.join(CONF[opts.GROUP].state_path, 'shares')


def record_name(link: str) -> str:
    """The file name, in :func:`asks_dir`, of the ask of by-id *link*."""
    return os.path.basename(validation.rbd_link(link))


def record_path(link: str) -> str:
    """Where the ask of the core added as by-id *link* is kept."""
    return os.path.join(asks_dir(), record_name(link))


def encode(ask: ShareAsk) -> str:
    return json.dumps(dataclasses.asdict(ask), sort_keys=True) + '\n'


def read(link: str) -> Optional[ShareAsk]:
    """The ask of the core added as *link*, or None (none, or unreadable)."""
    try:
        dir_fd = shared_files.open_dir(asks_dir())
        try:
            data = json.loads(shared_files.read_bounded(
                dir_fd, record_name(link), RECORD_LIMIT))
        finally:
            os.close(dir_fd)
        return ShareAsk(link=data['link'], cache_id=int(data['cache_id']),
                        core_id=int(data['core_id']),
                        share=validation.cache_share(data['share']))
    except shared_files.HostileFile as exc:
        LOG.warning('Cache-share record of %s not read: %s', link, exc)
        return None
    except (OSError, ValueError, KeyError, TypeError,
            exception.InvalidInput):
        return None


def asked(cache_id: int, core_id: int, link: str) -> Optional[int]:
    """The share core *core_id* of *cache_id* (added as *link*) asked for.

    None without a record, or when the record names another core (a
    record left by an earlier core of the same link).
    """
    ask = read(link)
    if ask is None or (ask.cache_id, ask.core_id) != (cache_id, core_id):
        return None
    return ask.share
