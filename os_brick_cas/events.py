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

"""Timings of flushes and rbd calls, for the exporter in another process.

Flushes and rbd map/unmap run in nova-compute (or the CLI), not in the
exporter. Each is recorded as one JSON line ``{"kind", "seconds",
"result", "time"}`` in ``[os_brick_cas] state_path``/events/<pid>.jsonl:
one file per process, opened with O_APPEND and written with a single
``write()`` per line, so threads and processes never interleave lines.

The log is bounded: a file past :data:`MAX_BYTES` is renamed to
``<pid>.jsonl.1`` (replacing the previous one) and a fresh file started;
when a process starts a file and more than :data:`MAX_FILES` files are
there, the oldest are removed. :mod:`os_brick_cas.metrics.eventlog` reads
the files and aggregates them.

Recording is best effort: a failure to write is logged at debug level
and never fails the attach, detach or flush being timed.

The directory may be writable by nova's user while the CLI writes as
root, so neither side follows links: the directory and the files are
opened with O_NOFOLLOW, only regular files are written or read, and a
reader validates every line with :func:`parse`.
"""

import contextlib
import errno
import json
import math
import os
import stat
import threading
import time
from typing import Iterator, NamedTuple, Optional

from os_brick import exception as brick_exception
from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas import opts
from os_brick_cas import shared_files

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

SUFFIX = '.jsonl'
#: size at which a process's file is rotated (one backup is kept)
MAX_BYTES = 1024 * 1024
#: event files (current and rotated) kept in the directory
MAX_FILES = 64
#: longest line a reader accepts (a written line is under 200 bytes)
MAX_LINE = 4096
OK, FAILED, TIMEOUT = 'ok', 'failed', 'timeout'
RESULTS = (OK, FAILED, TIMEOUT)
FLUSH, DRAIN, RBD_MAP, RBD_UNMAP = 'flush', 'drain', 'rbd_map', 'rbd_unmap'
KINDS = (FLUSH, DRAIN, RBD_MAP, RBD_UNMAP)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: a FIFO opens at once and is then refused; a symlink fails with ELOOP
_NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TIMEOUTS = (exception.FlushTimedOut, exception.RbdTimedOut,
             exception.CasadmTimedOut, brick_exception.ExecutionTimeout)

_rotate_lock = threading.Lock()


def _new_lock_in_child() -> None:
    # a fork while another thread rotates must not leave the child's lock
    # held forever
    global _rotate_lock
    _rotate_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def events_dir() -> str:
    """Where the event files are."""
    return os.path.join(CONF[opts.GROUP].state_path, 'events')


def result_of(error: BaseException) -> str:
    """'timeout' for a time bound that ran out, else 'failed'."""
    return TIMEOUT if isinstance(error, _TIMEOUTS) else FAILED


class Event(NamedTuple):
    """One validated event line."""

    kind: str
    seconds: float
    result: str


def parse(line: bytes) -> Optional[Event]:
    """The event on *line*, or None when it is not a valid event line.

    Valid: at most :data:`MAX_LINE` bytes of JSON, an object whose
    ``kind`` is one of :data:`KINDS`, ``result`` one of :data:`RESULTS` and
    ``seconds`` a finite, non-negative number.
    """
    if len(line) > MAX_LINE:
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict):
        return None
    kind, result = event.get('kind'), event.get('result')
    seconds = event.get('seconds')
    if (not isinstance(kind, str) or kind not in KINDS or
            not isinstance(result, str) or result not in RESULTS or
            isinstance(seconds, bool) or
            not isinstance(seconds, (int, float)) or
            not math.isfinite(seconds) or seconds < 0):
        return None
    return Event(kind, float(seconds), result)


def open_dir(directory: str) -> int:
    """A descriptor of *directory*; refuses a symlink (ELOOP)."""
    return os.open(directory, _DIR_FLAGS)


def open_file(name: str, dir_fd: int, flags: int, mode: int = 0o644) -> int:
    """Open *name* in *dir_fd* without following a link; regular files only.

    Raises OSError (ELOOP for a symlink, EINVAL for anything that is not a
    regular file with one link, e.g. a FIFO).
    """
    fd = os.open(name, flags | _NO_FOLLOW, mode, dir_fd=dir_fd)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise OSError(errno.EINVAL, 'not a regular file with one link', name)
    return fd


def _prune(dir_fd: int, keep: str) -> None:
    names = [name for name in os.listdir(dir_fd)
             if SUFFIX in name and not name.startswith(keep)]
    excess = len(names) + 1 - MAX_FILES
    if excess <= 0:
        return
    mtimes = {}
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            mtimes[name] = os.stat(name, dir_fd=dir_fd,
                                   follow_symlinks=False).st_mtime
    for name in sorted(mtimes, key=mtimes.get)[:excess]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)


def _dir_fd(directory: str) -> int:
    try:
        return open_dir(directory)
    except FileNotFoundError:
        shared_files.ensure_dir(directory)
        return open_dir(directory)


def _append(line: bytes) -> None:
    name = '%d%s' % (os.getpid(), SUFFIX)
    with _rotate_lock:
        dir_fd = _dir_fd(events_dir())
        try:
            try:
                size: Optional[int] = os.stat(
                    name, dir_fd=dir_fd, follow_symlinks=False).st_size
            except FileNotFoundError:
                size = None
            if size is not None and size + len(line) > MAX_BYTES:
                os.replace(name, name + '.1', src_dir_fd=dir_fd,
                           dst_dir_fd=dir_fd)
                size = None
            if size is None:
                _prune(dir_fd, keep=name)
            fd = open_file(name, dir_fd,
                           os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        finally:
            os.close(dir_fd)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def record(kind: str, seconds: float, result: str) -> None:
    """Append one event; never raises."""
    line = json.dumps({'kind': kind, 'seconds': round(seconds, 6),
                       'result': result, 'time': time.time()},
                      sort_keys=True) + '\n'
    try:
        _append(line.encode('utf-8'))
    except OSError as exc:
        # a link or FIFO where our file belongs was planted: say so
        level = (LOG.warning if exc.errno in (errno.ELOOP, errno.EINVAL)
                 else LOG.debug)
        level('Could not record %s event in %s: %s', kind, events_dir(),
              exc)
    except Exception as exc:
        LOG.debug('Could not record %s event in %s: %s', kind, events_dir(),
                  exc)


@contextlib.contextmanager
def timed(kind: str) -> Iterator[None]:
    """Record how long the block took and whether it raised."""
    start = time.monotonic()
    try:
        yield
    except Exception as exc:
        record(kind, time.monotonic() - start, result_of(exc))
        raise
    record(kind, time.monotonic() - start, OK)
