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
there, the oldest are removed. :mod:`os_brick_cas.metrics.events` reads
the files and aggregates them.

Recording is best effort: a failure to write is logged at debug level
and never fails the attach, detach or flush being timed.
"""

import contextlib
import json
import os
import threading
import time
from typing import Iterator

from os_brick import exception as brick_exception
from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas import opts

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

SUFFIX = '.jsonl'
#: size at which a process's file is rotated (one backup is kept)
MAX_BYTES = 1024 * 1024
#: event files (current and rotated) kept in the directory
MAX_FILES = 64
OK, FAILED, TIMEOUT = 'ok', 'failed', 'timeout'
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


def _prune(directory: str, keep: str) -> None:
    paths = [os.path.join(directory, name) for name in os.listdir(directory)
             if SUFFIX in name]
    paths = [path for path in paths if not path.startswith(keep)]
    excess = len(paths) + 1 - MAX_FILES
    if excess <= 0:
        return
    paths.sort(key=lambda path: os.stat(path).st_mtime)
    for path in paths[:excess]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _append(line: bytes) -> None:
    directory = events_dir()
    path = os.path.join(directory, '%d%s' % (os.getpid(), SUFFIX))
    with _rotate_lock:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            size = None
        if size is not None and size + len(line) > MAX_BYTES:
            os.replace(path, path + '.1')
            size = None
        if size is None:
            os.makedirs(directory, mode=0o755, exist_ok=True)
            _prune(directory, keep=path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                 0o644)
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
