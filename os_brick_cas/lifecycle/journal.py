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

"""The life-cycle journal: one typed, versioned record per volume.

Each in-flight transition (and each drain nova holds for an operation)
is one JSON file ``state_path``/lifecycle/<volume lock name>.json. The
directory is shared with the service group, so every file in it is
hostile input (:mod:`os_brick_cas.shared_files`): it is written by
mkstemp + complete write + fsync + rename, read without following links
and bounded, and validated against :data:`SCHEMA_VERSION`.

A file that is not a valid record of this schema (a symlink, a FIFO, a
hard link, a foreign owner, too large, truncated or not JSON, another
shape or a newer version) is **quarantined**: renamed into
``lifecycle/quarantine/<name>.<ns>.<reason>``, logged as an error, and
reported by :func:`quarantined` (doctor FAILs with its path; the
exporter's drift metric has kind ``quarantine``). It is never fatal and
never silently skipped. The host's own state then decides (a pinned core
reads as drained: the safe side); an operator looks at the file and
removes it from the quarantine.
"""

import dataclasses
import json
import os
import time
from typing import Any, Iterator, Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas.lifecycle import states
from os_brick_cas import locks
from os_brick_cas import opts
from os_brick_cas import rbd_names
from os_brick_cas import shared_files

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: version written in every record; a record without one predates
#: versioning and has the same fields
SCHEMA_VERSION = 1
SUFFIX = '.json'
QUARANTINE = 'quarantine'
#: a record is well under 1 KiB
MAX_BYTES = 64 * 1024
#: states a record may name (the life cycle's; add, never rename)
KNOWN_STATES = frozenset(states.STATES)
PHASES = (None, 'host', 'cinder')

# reasons a record is quarantined, besides shared_files' own
NOT_JSON = 'not-json'
BAD_SCHEMA = 'bad-schema'
NEWER_VERSION = 'newer-version'


class BadRecord(ValueError):
    """Bytes that are not a record of this schema; *reason* says how."""

    def __init__(self, reason: str, detail: str):
        self.reason = reason
        super().__init__('%s: %s' % (reason, detail))


@dataclasses.dataclass(frozen=True)
class Record:
    """One volume's journal record."""

    spec: rbd_names.ImageSpec
    state: str
    volume_id: Optional[str] = None
    #: 'host' before Cinder was asked, 'cinder' after; None when settled
    phase: Optional[str] = None
    #: the state a drain started from
    origin: Optional[str] = None
    epoch: Optional[str] = None
    host: Optional[str] = None
    #: the nova operation (or 'operator') a drain is held for
    holder: Optional[str] = None
    instance: Optional[str] = None
    version: int = SCHEMA_VERSION

    def replace(self, **changes: Any) -> 'Record':
        """A copy with *changes* (the version becomes this schema's)."""
        return dataclasses.replace(self, version=SCHEMA_VERSION, **changes)

    def encode(self) -> bytes:
        data = dataclasses.asdict(self)
        data['version'] = SCHEMA_VERSION
        return (json.dumps(data, sort_keys=True) + '\n').encode()

    @classmethod
    def decode(cls, raw: bytes) -> 'Record':
        """The record *raw* holds; BadRecord if it is not one."""
        try:
            data = json.loads(raw.decode('utf-8'))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise BadRecord(NOT_JSON, str(exc))
        if not isinstance(data, dict):
            raise BadRecord(BAD_SCHEMA, 'not a JSON object')
        version = data.pop('version', SCHEMA_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise BadRecord(BAD_SCHEMA, 'version %r' % (version,))
        if version > SCHEMA_VERSION:
            raise BadRecord(NEWER_VERSION, 'version %d, this release reads '
                                           'up to %d' % (version,
                                                         SCHEMA_VERSION))
        fields = {f.name for f in dataclasses.fields(cls)} - {'version'}
        unknown = set(data) - fields
        if unknown:
            raise BadRecord(BAD_SCHEMA, 'unknown fields %s' %
                            ', '.join(sorted(unknown)))
        spec = data.pop('spec', None)
        state = data.get('state')
        if state not in KNOWN_STATES:
            raise BadRecord(BAD_SCHEMA, 'state %r' % (state,))
        if data.get('phase') not in PHASES:
            raise BadRecord(BAD_SCHEMA, 'phase %r' % (data.get('phase'),))
        if data.get('origin') not in KNOWN_STATES | {None}:
            raise BadRecord(BAD_SCHEMA, 'origin %r' % (data.get('origin'),))
        for name, value in data.items():
            if value is not None and not isinstance(value, str):
                raise BadRecord(BAD_SCHEMA, '%s is %s, not a string'
                                % (name, type(value).__name__))
        return cls(spec=_spec(spec), version=SCHEMA_VERSION, **data)


def _spec(data: Any) -> rbd_names.ImageSpec:
    if not isinstance(data, dict):
        raise BadRecord(BAD_SCHEMA, 'spec is not an object')
    names = {f.name for f in dataclasses.fields(rbd_names.ImageSpec)}
    if set(data) - names or not {'pool', 'namespace', 'image'} <= set(data):
        raise BadRecord(BAD_SCHEMA, 'spec fields %s' % ', '.join(
            sorted(data)))
    for key, value in data.items():
        if not (isinstance(value, str) or (key == 'fsid' and value is None)):
            raise BadRecord(BAD_SCHEMA, 'spec %s %r' % (key, value))
    return rbd_names.ImageSpec(**data)


@dataclasses.dataclass(frozen=True)
class Quarantined:
    """A journal file that was not a valid record, and where it is now."""

    path: str
    reason: str


def journal_dir() -> str:
    return os.path.join(CONF[opts.GROUP].state_path, 'lifecycle')


def quarantine_dir() -> str:
    return os.path.join(journal_dir(), QUARANTINE)


def name_of(spec: rbd_names.ImageSpec) -> str:
    return locks.volume_lock_name(spec) + SUFFIX


def path_of(spec: rbd_names.ImageSpec) -> str:
    return os.path.join(journal_dir(), name_of(spec))


def write(record: Record) -> None:
    """Write *record* durably; OSError (and the old record kept) if not."""
    directory = journal_dir()
    shared_files.ensure_dir(directory)
    shared_files.replace_atomically(directory, name_of(record.spec),
                                    record.encode())


def remove(spec: rbd_names.ImageSpec) -> None:
    shared_files.remove(journal_dir(), name_of(spec))


def read(spec: rbd_names.ImageSpec) -> Optional[Record]:
    """*spec*'s record, or None (none, or a bad one now quarantined)."""
    try:
        dir_fd = shared_files.open_dir(journal_dir())
    except FileNotFoundError:
        return None
    try:
        return _load(dir_fd, name_of(spec), spec)
    finally:
        os.close(dir_fd)


def _load(dir_fd: int, name: str,
          spec: Optional[rbd_names.ImageSpec] = None) -> Optional[Record]:
    """The record file *name*; a bad one is quarantined (None)."""
    try:
        raw = shared_files.read_bounded(dir_fd, name, MAX_BYTES)
        record = Record.decode(raw)
        if spec is not None and not record.spec.same_image(spec):
            raise BadRecord(BAD_SCHEMA, 'names image %s' % record.spec.label)
        if name != name_of(record.spec):
            raise BadRecord(BAD_SCHEMA, 'names image %s, not its file name'
                            % record.spec.label)
        return record
    except FileNotFoundError:
        return None
    except (shared_files.HostileFile, BadRecord) as exc:
        _quarantine(dir_fd, name, exc.reason, str(exc))
        return None


def _quarantine(dir_fd: int, name: str, reason: str, detail: str) -> None:
    """Rename *name* aside into the quarantine, loudly."""
    target = '%s.%d.%s' % (name, time.time_ns(), reason)
    where = os.path.join(journal_dir(), name)
    try:
        shared_files.ensure_dir(quarantine_dir())
        q_fd = shared_files.open_dir(quarantine_dir())
        try:
            os.rename(name, target, src_dir_fd=dir_fd, dst_dir_fd=q_fd)
            shared_files.fsync_dir(q_fd)
            shared_files.fsync_dir(dir_fd)
        finally:
            os.close(q_fd)
        where = os.path.join(quarantine_dir(), target)
    except OSError as exc:
        LOG.error('Could not move bad life-cycle record %s into %s: %s',
                  where, quarantine_dir(), exc)
    LOG.error('Life-cycle record %s is not a valid record (%s); it is '
              'quarantined at %s and ignored: the host\'s own state '
              'decides. Look at it, then remove it.', name, detail, where)


def records() -> Iterator[Record]:
    """Every valid journal record on this host (bad ones quarantined)."""
    try:
        dir_fd = shared_files.open_dir(journal_dir())
    except FileNotFoundError:
        return
    try:
        names = sorted(os.listdir(dir_fd))
        found = []
        for name in names:
            if not name.endswith(SUFFIX) or name.startswith('.'):
                continue
            record = _load(dir_fd, name)
            if record is not None:
                found.append(record)
    finally:
        os.close(dir_fd)
    yield from found


def quarantined() -> list[Quarantined]:
    """Bad records found so far, moved aside (or left where they were).

    Scans the journal first, so a bad file planted since is included.
    """
    list(records())
    found = []
    try:
        q_fd = shared_files.open_dir(quarantine_dir())
    except FileNotFoundError:
        q_fd = None
    except OSError as exc:      # e.g. a symlink planted as the quarantine
        found.append(Quarantined(quarantine_dir(), 'unusable quarantine: %s'
                                 % exc))
        q_fd = None
    if q_fd is not None:
        try:
            for name in sorted(os.listdir(q_fd)):
                found.append(Quarantined(os.path.join(quarantine_dir(), name),
                                         name.rsplit('.', 1)[-1]))
        finally:
            os.close(q_fd)
    # bad files that could not be moved are still in the journal
    try:
        dir_fd = shared_files.open_dir(journal_dir())
    except FileNotFoundError:
        return found
    try:
        for name in sorted(os.listdir(dir_fd)):
            if not name.endswith(SUFFIX) or name.startswith('.'):
                continue
            try:
                Record.decode(shared_files.read_bounded(dir_fd, name,
                                                        MAX_BYTES))
            except FileNotFoundError:
                continue
            except (shared_files.HostileFile, BadRecord) as exc:
                found.append(Quarantined(os.path.join(journal_dir(), name),
                                         exc.reason))
    finally:
        os.close(dir_fd)
    return found
