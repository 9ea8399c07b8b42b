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

"""doctor: the directories nova-compute and the CLI share are as documented.

state_path/lifecycle, state_path/events and the lock directory: owner
root, group ``[os_brick_cas] service_group``, mode 2770 (the admin
guide's "Shared directories"). A directory another user created first
would keep nova-compute (or the CLI) from writing its journal, events or
locks there later.
"""

import grp
import os
import stat
from typing import Iterator

from os_brick_cas.cmd.checks import FAIL
from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import locking
from os_brick_cas.cmd.checks import OK
from os_brick_cas.cmd.checks import register
from os_brick_cas.cmd.checks import WARN
from os_brick_cas import opts
from os_brick_cas import shared_files


def directories(host: Host) -> list[tuple[str, str]]:
    """(shared directory, level of a wrong one) of *host*'s configuration.

    The lock directory's is WARN, as the lock-path check's for its mode.
    """
    state_path = host.conf[opts.GROUP].state_path
    found = [(os.path.join(state_path, 'lifecycle'), FAIL),
             (os.path.join(state_path, 'events'), FAIL)]
    lock_path = locking.effective(host.conf)
    if lock_path:
        found.append((lock_path, WARN))
    return found


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


@register('shared-dirs')
def shared_dirs(host: Host) -> Iterator[Finding]:
    """Each shared directory: owner root, the service group, mode 2770."""
    wanted = host.conf[opts.GROUP].service_group
    gid = shared_files.service_gid(host.conf)
    if gid is None:
        yield Finding(FAIL, '[os_brick_cas] service_group %r names no group '
                            "of this host: set it to nova-compute's group "
                            '(kolla: 42436), the group of the shared '
                            'directories' % wanted)
        return
    group = _group_name(gid)
    for path, level in directories(host):
        fix = ('chown root:%s %s && chmod 2770 %s' % (group, path, path))
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            yield Finding(OK, '%s does not exist yet: the first writer '
                              'creates it root:%s 2770' % (path, group))
            continue
        if not stat.S_ISDIR(info.st_mode):
            yield Finding(level, '%s is not a directory (a link or file '
                                 'planted there?): remove it; the next '
                                 'writer creates the directory' % path)
            continue
        mode = stat.S_IMODE(info.st_mode)
        if info.st_gid != gid or mode != shared_files.DIR_MODE:
            yield Finding(level, '%s is %s:%s %04o, not root:%s 2770: '
                                 'nova-compute or the CLI cannot write its '
                                 'files there (or others can). Fix it: %s'
                                 % (path, info.st_uid,
                                    _group_name(info.st_gid), mode, group,
                                    fix))
        elif info.st_uid != 0:
            yield Finding(WARN, '%s is owned by uid %d (nova-compute created '
                                'it first?), not root: chown root %s'
                                % (path, info.st_uid, path))
        else:
            yield Finding(OK, '%s: root:%s 2770' % (path, group))
