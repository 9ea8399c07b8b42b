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

"""doctor: nova-compute and this command take the same lock files.

Every life-cycle step of a volume (attach, detach, flush, drain, discard)
holds its lock file in ``lock_path`` (:mod:`os_brick_cas.locks`). A CLI
that looks elsewhere takes no lock nova-compute sees, so a flush or drain
can run under a live attach. nova-compute reads only nova's files; this
command reads those and its own afterwards, which win.
"""

import grp
import os
import stat
from typing import Iterator, Optional

from oslo_config import cfg

from os_brick_cas.cmd.checks import FAIL
from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import OK
from os_brick_cas.cmd.checks import register
from os_brick_cas.cmd.checks import WARN
from os_brick_cas import opts

#: where a lock directory is named, most specific first
SOURCES = ((opts.GROUP, 'lock_path'), ('oslo_concurrency', 'lock_path'))
ADVICE = ('install -d -o root -g <nova-compute\'s group> -m 2770 %s '
          '(nova-compute runs as its own user, this command as root; both '
          'create lock files there, and setgid gives them its group)')


def effective(conf: cfg.ConfigOpts) -> Optional[str]:
    """The lock directory *conf* gives os_brick_cas.locks, or None."""
    for group, name in SOURCES:
        try:
            value = conf[group][name]
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            continue
        if value:
            return value
    return None


def is_nova_file(path: str) -> bool:
    """Whether nova-compute reads *path* (nova.conf, nova.conf.d, kolla)."""
    parent = os.path.basename(os.path.dirname(path))
    return (os.path.basename(path) == 'nova.conf' or
            parent == 'nova.conf.d')


def named_in(paths: list[str]) -> Optional[tuple[str, str]]:
    """(lock directory, file) that nova-compute reading *paths* uses."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for path in paths:
        sections: dict[str, dict[str, list[str]]] = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except (OSError, cfg.ParseError):
            continue
        for group, name in SOURCES:
            values = sections.get(group, {}).get(name)
            if values and values[-1]:
                found[(group, name)] = (values[-1], path)
    for source in SOURCES:
        if source in found:
            return found[source]
    return None


@register('lock-path')
def lock_path(host: Host) -> Iterator[Finding]:
    """The lock directory is set, nova's, and shared by group."""
    mine = effective(host.conf)
    if not mine:
        yield Finding(FAIL, 'no lock directory: set [os_brick_cas] lock_path '
                            "(or [oslo_concurrency] lock_path) in "
                            "nova-compute's nova.conf; this command reads "
                            'it there. Without it no volume lock can be '
                            'taken, by nova-compute or by this command.')
        return
    nova = named_in([p for p in host.config_files if is_nova_file(p)])
    if nova and os.path.normpath(nova[0]) != os.path.normpath(mine):
        yield Finding(FAIL, 'nova-compute takes its volume locks in %s (%s), '
                            'this command in %s: a flush, drain or detach '
                            'from here would not wait for an attach in '
                            'nova-compute. Name one directory in both, or '
                            'remove lock_path from the file that overrides '
                            "nova's." % (nova[0], nova[1], mine))
        return
    try:
        info = os.stat(mine)
    except FileNotFoundError:
        # the first lock taken creates it as the shared directories are
        # (os_brick_cas.shared_files.ensure_dir): nothing to do yet
        yield Finding(OK, 'volume locks in %s: it does not exist yet; the '
                          'first lock taken creates it (owner, group and '
                          'mode as doc/source/admin/shared-directories.rst '
                          'says)' % mine)
        return
    if not stat.S_ISDIR(info.st_mode) or (
            info.st_mode & 0o2070 != 0o2070):
        yield Finding(WARN, 'lock directory %s (mode %o) is not a setgid, '
                            'group-writable directory: nova-compute may be '
                            'unable to open a lock file this command '
                            'created, and its attach then fails. Fix it: %s.'
                            % (mine, stat.S_IMODE(info.st_mode),
                               ADVICE % mine))
        return
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    yield Finding(OK, 'volume locks in %s (group %s, setgid)%s' % (
        mine, group, ", as nova-compute's nova.conf says" if nova else ''))
