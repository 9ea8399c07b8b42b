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

"""Files in the directories shared with the service group: hostile ground.

``state_path``/lifecycle, ``state_path``/events and the lock directory
are written by root (the CLI, privsep) and by nova-compute's user alike,
so any member of the service group can plant a symlink, a FIFO, a hard
link or a half-written file there. Everything this process does in them
goes through this module:

* a directory is created by whoever comes first with the one documented
  owner, group and mode (:data:`DIR_MODE`, root and ``[os_brick_cas]
  service_group``; see the admin guide's "Shared directories"); an
  existing one is never changed;
* a temporary is created by mkstemp in the directory (O_EXCL, no link
  followed), written completely (every byte, then fsync) and renamed
  into place, then the directory is fsynced;
* a file is opened with O_NOFOLLOW|O_NONBLOCK and accepted only when
  fstat shows a regular file with one link whose owner is root, this
  process's user or whose group is the service group; reads are bounded;
* a lock file is created with O_EXCL|O_NOFOLLOW and only a descriptor
  this process created is ever chmod'ed.

Refusals raise :class:`HostileFile` with a short reason the callers use
to quarantine and report the file.
"""

import errno
import grp
import os
import stat
import tempfile
from typing import Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import opts

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: owner root, group the service group, setgid so files inherit the group
DIR_MODE = 0o2770
#: files shared with the service group
FILE_MODE = 0o660
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# reasons a file is refused (also the suffix of its quarantined name)
SYMLINK = 'symlink'
NOT_REGULAR = 'not-regular'
HARD_LINK = 'hard-link'
FOREIGN_OWNER = 'foreign-owner'
TOO_LARGE = 'too-large'


class HostileFile(Exception):
    """A shared file this process refuses to use; *reason* says why."""

    def __init__(self, path: str, reason: str, detail: str = ''):
        self.path = path
        self.reason = reason
        super().__init__('%s: %s%s' % (path, reason,
                                       ' (%s)' % detail if detail else ''))


def service_gid(conf: Optional[cfg.ConfigOpts] = None) -> Optional[int]:
    """The gid ``[os_brick_cas] service_group`` names, or None if unknown."""
    name = (conf or CONF)[opts.GROUP].service_group
    if not name:
        return None
    if name.isdigit():
        return int(name)
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def open_dir(path: str) -> int:
    """A descriptor of directory *path*; a symlink is refused (ELOOP)."""
    return os.open(path, _DIR_FLAGS)


def ensure_dir(path: str, conf: Optional[cfg.ConfigOpts] = None) -> None:
    """Create shared directory *path* as documented, if it is missing.

    Root makes it root:<service group> :data:`DIR_MODE`; another user
    (nova-compute) can only give it the service group and the mode, and
    stays its owner (doctor says how to hand it to root). An existing
    directory is left as it is: doctor reports one that differs.
    """
    parent = os.path.dirname(os.path.normpath(path))
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, mode=0o755, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    fd = open_dir(path)
    try:
        gid = service_gid(conf)
        if gid is None:
            LOG.warning('Created %s without the service group: '
                        '[os_brick_cas] service_group %r names no group '
                        'of this host', path,
                        (conf or CONF)[opts.GROUP].service_group)
            gid = -1
        try:
            os.fchown(fd, 0 if os.geteuid() == 0 else -1, gid)
        except PermissionError as exc:
            LOG.warning('Could not give %s the service group: %s', path, exc)
        os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)


def trusted_owner(info: os.stat_result,
                  conf: Optional[cfg.ConfigOpts] = None) -> bool:
    """Whether a file is root's, this user's or of the service group."""
    return (info.st_uid in (0, os.geteuid()) or
            info.st_gid == service_gid(conf))


def read_bounded(dir_fd: int, name: str, limit: int) -> bytes:
    """The content of *name* in *dir_fd*, at most *limit* bytes.

    HostileFile for a symlink, anything but a regular file with one link
    (a FIFO opens at once and is refused), a foreign owner, or more than
    *limit* bytes. FileNotFoundError when it is gone.
    """
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise HostileFile(name, SYMLINK)
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise HostileFile(name, NOT_REGULAR,
                              'mode %o' % stat.S_IFMT(info.st_mode))
        if info.st_nlink != 1:
            raise HostileFile(name, HARD_LINK, '%d links' % info.st_nlink)
        if not trusted_owner(info):
            raise HostileFile(name, FOREIGN_OWNER, 'uid %d gid %d' % (
                info.st_uid, info.st_gid))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise HostileFile(name, TOO_LARGE, 'over %d bytes' % limit)
        return b''.join(chunks)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of *data* to *fd*; OSError if it cannot."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, 'no progress writing')
        view = view[written:]


def fsync_dir(dir_fd: int) -> None:
    os.fsync(dir_fd)


def replace_atomically(directory: str, name: str, data: bytes,
                       mode: int = FILE_MODE) -> None:
    """Make *name* in *directory* hold *data*, durably, or raise.

    The temporary is created by mkstemp in the directory (O_EXCL and
    O_NOFOLLOW: a planted link at any name is never written through),
    written completely and fsynced before the rename; a failed write
    leaves the previous file as it was and removes the temporary.
    """
    dir_fd = open_dir(directory)
    try:
        fd, tmp_path = tempfile.mkstemp(prefix='.%s.' % name, suffix='.tmp',
                                        dir=directory)
        tmp = os.path.basename(tmp_path)
        try:
            try:
                os.fchmod(fd, mode)
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        fsync_dir(dir_fd)
    finally:
        os.close(dir_fd)


def remove(directory: str, name: str) -> bool:
    """Remove *name* (never following a link); False if it was not there."""
    try:
        dir_fd = open_dir(directory)
    except FileNotFoundError:
        return False
    try:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return False
        fsync_dir(dir_fd)
        return True
    finally:
        os.close(dir_fd)


def create_exclusive(path: str, mode: int = FILE_MODE) -> bool:
    """Create the empty file *path* with *mode*; False if it exists.

    O_EXCL|O_NOFOLLOW: a planted link at *path* is never followed (nor
    created through); the mode is set on the descriptor this process
    just created (fchmod), never on a file found there.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, mode)     # the umask may have taken group bits
    finally:
        os.close(fd)
    return True
