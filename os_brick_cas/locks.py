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
group-writable (0660): make ``lock_path`` a directory of group nova with
the setgid bit (``install -d -g nova -m 2770``), and its files inherit
that group.
"""

import contextlib
import os
from typing import Iterator, Optional

from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_log import log as logging
import tenacity

from os_brick_cas import exception
from os_brick_cas import opts
from os_brick_cas import rbd_names

CONF = cfg.CONF
LOG = logging.getLogger(__name__)
_PREFIX = 'os-brick-cas-'
#: seconds between two attempts to take a busy lock
_POLL_SECONDS = 0.2
#: lock files are shared by nova-compute and the CLI (see above)
FILE_MODE = 0o660


def _shared_file(name: str) -> None:
    """Create lock file *name* group-writable before lockutils opens it."""
    lock_path = CONF[opts.GROUP].lock_path
    if not lock_path:
        return
    path = os.path.join(lock_path, _PREFIX + name)
    try:
        os.makedirs(lock_path, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, FILE_MODE)
    except OSError as exc:
        LOG.debug('Could not prepare lock file %s: %s', path, exc)
        return
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _lock(name: str, what: str,
          timeout: Optional[float] = None) -> Iterator[None]:
    """Hold lock *name*; raise LockTimedOut after lock_timeout seconds.

    *timeout*: the caller's own time left, when shorter.
    """
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
    and from the CLI alike.
    """
    return _lock(volume_lock_name(spec),
                 'volume %s' % '/'.join(p for p in (spec.pool, spec.namespace,
                                                    spec.image) if p),
                 timeout)


def cache_lock(cache_id: int, timeout: Optional[float] = None):
    """Serialise casadm changes to one cache instance."""
    return _lock('cache-%d' % cache_id, 'cache instance %d' % cache_id,
                 timeout)
