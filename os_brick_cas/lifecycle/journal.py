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

"""The life-cycle journal: one record per volume with a transition in flight.

A small JSON file per volume under ``state_path``/lifecycle, written
atomically. Only :func:`os_brick_cas.lifecycle.transitions.advance`
writes states into it.
"""

import dataclasses
import json
import os
from typing import Iterator, Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import locks
from os_brick_cas import opts
from os_brick_cas import rbd_names

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def journal_dir() -> str:
    return os.path.join(CONF[opts.GROUP].state_path, 'lifecycle')


def _journal_path(spec: rbd_names.ImageSpec) -> str:
    return os.path.join(journal_dir(), locks.volume_lock_name(spec) +
                        '.json')


def write_record(spec: rbd_names.ImageSpec, record: dict) -> None:
    """Write *spec*'s journal record durably (tmp + fsync + rename)."""
    directory = journal_dir()
    os.makedirs(directory, mode=0o2770, exist_ok=True)
    path = _journal_path(spec)
    tmp = path + '.tmp'
    data = dict(record, spec=dataclasses.asdict(spec))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o660)
    try:
        os.write(fd, (json.dumps(data, sort_keys=True) + '\n').encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_record(spec: rbd_names.ImageSpec) -> Optional[dict]:
    try:
        with open(_journal_path(spec)) as record_file:
            return json.load(record_file)
    except FileNotFoundError:
        return None


def remove_record(spec: rbd_names.ImageSpec) -> None:
    try:
        os.unlink(_journal_path(spec))
    except FileNotFoundError:
        return
    _fsync_dir(journal_dir())


def records() -> Iterator[tuple[rbd_names.ImageSpec, dict]]:
    """Every journal record on this host (a half-written tmp is none)."""
    try:
        names = sorted(os.listdir(journal_dir()))
    except FileNotFoundError:
        return
    for name in names:
        if not name.endswith('.json'):
            continue
        try:
            with open(os.path.join(journal_dir(), name)) as record_file:
                data = json.load(record_file)
        except (OSError, ValueError) as exc:
            LOG.error('Unreadable life-cycle record %s: %s', name, exc)
            continue
        yield rbd_names.ImageSpec(**data['spec']), data
