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

"""External (inter-process) locks: one per volume, one per cache instance.

There is deliberately no global lock: attaches to different instances, and
the parts of attaches that do not change an instance, run in parallel.
Waiting for a lock is bounded by ``[os_brick_cas] lock_timeout``, or by
less when the caller passes what is left of its own time bound.

nova-compute (user nova) and the os-brick-cas CLI (root, or an operator in
group nova) take the same lock files, so a lock file is created
group-writable (0660) in ``lock_path``, a shared directory (root, the
service group, setgid 2770: the admin guide's "Shared directories"),
whose files inherit that group.

A lock is re-entrant for its holder: the thread (under nova's eventlet
monkey-patching, the greenthread) that holds a lock may take it again,
e.g. nova_ext's attach holds the volume lock around the fence marker's
compare-and-swap and calls the connector, which takes it too. The lock
file is taken once, by the outermost ``with``, and released only when
that one exits; a nested ``with`` never waits, so its timeout does not
apply. Every other thread, greenthread and process waits (bounded) as
before. Order: a volume lock outside, a cache instance lock inside.
"""

import contextlib
import os
import stat
import threading
from typing import Iterator, Optional

from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_log import log as logging
import tenacity

from os_brick_cas import exception
from os_brick_cas import opts
from os_brick_cas import rbd_names
from os_brick_cas import shared_files

CONF = cfg.CONF
LOG = logging.getLogger(__name__)
_PREFIX = 'os-brick-cas-'
#: seconds between two attempts to take a busy lock
_POLL_SECONDS = 0.2
#: lock files are shared by nova-compute and the CLI (see above)
FILE_MODE = 0o660


#: (holder, lock name) -> nesting depth of the locks held in this process.
#: The holder is ``threading.get_ident()`` looked up at each call, so under
#: eventlet's monkey-patching (nova-compute) it names the greenthread even
#: if this module was imported before the patching.
_depth: dict[tuple[int, str], int] = {}


#: serialises creating a lock file with taking one: see _shared_file
_opening = threading.Lock()


def _shared_file(name: str) -> None:
    """Create lock file *name* group-writable before lockutils opens it.

    Never opens an existing lock file: closing any descriptor of a file
    drops every fcntl lock this process holds on it, so a thread that
    merely prepared the file would let other processes in while another
    thread of this one holds the lock. A new file is created (and
    closed) while no thread of this process can be taking it. The lock
    directory is shared with the service group: a link planted at the
    name is never followed, and only the file this process created is
    given its mode (by its descriptor; see os_brick_cas.shared_files).
    """
    lock_path = CONF[opts.GROUP].lock_path
    if not lock_path:
        return
    path = os.path.join(lock_path, _PREFIX + name)
    try:
        shared_files.ensure_dir(lock_path)
        with _opening:
            if not shared_files.create_exclusive(path, FILE_MODE):
                _remove_planted(path)
    except OSError as exc:
        LOG.warning('Could not prepare lock file %s: %s', path, exc)


def _remove_planted(path: str) -> None:
    """Replace a link or non-file planted at lock file *path*.

    lockutils opens the path it is given, so a symlink there would make
    it create and lock the link's target (as root, for the CLI).
    """
    info = os.lstat(path)
    if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
        return
    LOG.error('Lock file %s is not a regular file (mode %o, %d links; '
              'planted?): it is removed and created again', path,
              info.st_mode, info.st_nlink)
    os.unlink(path)
    shared_files.create_exclusive(path, FILE_MODE)


def held(name: str) -> bool:
    """Whether this thread (greenthread) holds lock *name* now."""
    return (threading.get_ident(), name) in _depth


@contextlib.contextmanager
def _lock(name: str, what: str,
          timeout: Optional[float] = None) -> Iterator[None]:
    """Hold lock *name*; raise LockTimedOut after lock_timeout seconds.

    *timeout*: the caller's own time left, when shorter. Re-entrant for
    the thread that holds it (see the module's docstring).
    """
    key = (threading.get_ident(), name)
    if key in _depth:
        _depth[key] += 1
        try:
            yield
        finally:
            _depth[key] -= 1
        return
    with _take(name, what, timeout):
        _depth[key] = 1
        try:
            yield
        finally:
            del _depth[key]


@contextlib.contextmanager
def _take(name: str, what: str,
          timeout: Optional[float] = None) -> Iterator[None]:
    """Take the lock file of *name* (not held here yet), bounded."""
    configured = CONF[opts.GROUP].lock_timeout
    timeout = configured if timeout is None else max(
        0.0, min(configured, timeout))
    _shared_file(name)
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(
            lockutils.AcquireLockFailedException),
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(_POLL_SECONDS),
        reraise=True)
    held = None
    try:
        for attempt in retrying:
            with attempt:
                candidate = lockutils.lock(
                    name, lock_file_prefix=_PREFIX, external=True,
                    lock_path=CONF[opts.GROUP].lock_path, blocking=False)
                with _opening:
                    candidate.__enter__()
                held = candidate
    except lockutils.AcquireLockFailedException:
        LOG.error('Gave up waiting %(timeout)s s for the lock of %(what)s.',
                  {'timeout': timeout, 'what': what})
        raise exception.LockTimedOut(timeout=timeout, what=what)
    try:
        yield
    finally:
        held.__exit__(None, None, None)


def volume_lock_name(spec: rbd_names.ImageSpec) -> str:
    return 'rbd-' + '-'.join(rbd_names.escape(part) for part in (
        spec.pool, spec.namespace, spec.image))


def volume_lock(spec: rbd_names.ImageSpec, timeout: Optional[float] = None):
    """Serialise every life-cycle step of one RBD image on this host.

    Attach, detach, drain, undrain, recover and discard, from nova-compute
    and from the CLI alike; nova_ext's fence marker changes of an attach
    or detach happen inside it, with the host change they belong to.
    Re-entrant for its holder.
    """
    return _lock(volume_lock_name(spec),
                 'volume %s' % spec.path,
                 timeout)


def cache_lock(cache_id: int, timeout: Optional[float] = None):
    """Serialise casadm changes to one cache instance."""
    return _lock('cache-%d' % cache_id, 'cache instance %d' % cache_id,
                 timeout)
