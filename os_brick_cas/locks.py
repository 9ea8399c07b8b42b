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
Waiting for a lock is bounded by ``[os_brick_cas] lock_timeout``.
"""

import contextlib
from typing import Iterator

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


@contextlib.contextmanager
def _lock(name: str, what: str) -> Iterator[None]:
    """Hold lock *name*; raise LockTimedOut after lock_timeout seconds."""
    timeout = CONF[opts.GROUP].lock_timeout
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


def volume_lock(spec: rbd_names.ImageSpec):
    """Serialise attach/detach of one RBD image on this host."""
    return _lock('rbd-' + '-'.join(rbd_names.escape(part) for part in (
        spec.pool, spec.namespace, spec.image)),
        'volume %s' % '/'.join(p for p in (spec.pool, spec.namespace,
                                           spec.image) if p))


def cache_lock(cache_id: int):
    """Serialise casadm changes to one cache instance."""
    return _lock('cache-%d' % cache_id, 'cache instance %d' % cache_id)
