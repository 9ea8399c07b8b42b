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

"""doctor's checks of the host: casadm, kernel, modules, files in place."""

import configparser
import os
import platform
import re
import shutil
import stat
from typing import Iterator

from os_brick_cas.cmd.checks import FAIL
from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import NotChecked
from os_brick_cas.cmd.checks import OK
from os_brick_cas.cmd.checks import register
from os_brick_cas.cmd.checks import WARN
from os_brick_cas.cmd import config
from os_brick_cas import exception
from os_brick_cas.opencas import releases
from os_brick_cas.opencas import stand_in
from os_brick_cas import opts

#: kernel modules a caching host needs (``/sys/module/NAME`` when loaded)
KERNEL_MODULES = {'rbd': 'krbd maps the volumes',
                  'cas_cache': 'Open CAS caches them'}
#: the privsep contexts nova-compute starts through rootwrap
PRIVSEP_CONTEXTS = ('os_brick_cas.privileged.default',
                    'os_brick_cas.privileged.flush')
#: the shipped filter of each context (etc/rootwrap.d/os-brick-cas.filters)
FILTER = ('RegExpFilter, privsep-helper, root, privsep-helper, '
          '--config-file, /etc/(?!\\.\\.).*, --privsep_context, %s, '
          '--privsep_sock_path, /tmp/.*')
#: where nova's rootwrap looks when rootwrap.conf does not say
ROOTWRAP_DIRS = ('/etc/nova/rootwrap.d', '/usr/share/nova/rootwrap')
ROOTWRAP_CONF = '/etc/nova/rootwrap.conf'
UDEV_RULE = '60-os-brick-cas-rbd.rules'
#: the rule's line that keeps udev's inotify watch (and its blkid probe
#: after every writer's close) off Open CAS's exported devices
NOWATCH = re.compile(r'^[^#]*KERNEL=="cas[^"]*"[^#]*OPTIONS:="nowatch"',
                     re.MULTILINE)
UDEV_DIRS = ('/etc/udev/rules.d', '/lib/udev/rules.d',
             '/usr/lib/udev/rules.d')
#: what installs the rule with this installation's namer path
INSTALL_RULE = 'os-brick-cas host install-files --only udev-rule'


def rooted(path: str) -> str:
    """*path* under the host root doctor examines (tests use a fake one)."""
    return os.path.join(config.ROOT, path.lstrip('/'))


@register('casadm')
def casadm_release(host: Host) -> Iterator[Finding]:
    """casadm installed, answering, and a release os-brick-cas drives."""
    if not shutil.which('casadm'):
        yield Finding(FAIL, 'casadm not found on PATH: install Open CAS '
                            '(https://open-cas.github.io) on this host.')
        return
    error = host.casadm_error()
    if isinstance(error, exception.CasModuleNotLoaded):
        yield Finding(FAIL, 'the Open CAS kernel module is not loaded: run '
                            '"modprobe cas_cache" (and check dmesg if it '
                            'fails).')
        return
    if error is not None:
        yield Finding(FAIL, 'casadm does not answer: %s' % error)
        return
    versions = host.versions()
    yield Finding(OK, 'casadm %s, kernel module %s' % (
        versions.get('CAS CLI Utility', '?'),
        versions.get('CAS Cache Kernel Module', '?')))
    cli_ok, cli_message = releases.check_cli(
        versions.get('CAS CLI Utility', ''))
    if not cli_ok:
        yield Finding(FAIL, cli_message)
    for level, message in releases.same_release_line(versions):
        yield Finding(level, message)


@register('kernel')
def kernel_supported(host: Host) -> Iterator[Finding]:
    """The running kernel is supported by the installed Open CAS line."""
    module_version = host.versions().get('CAS Cache Kernel Module', '')
    supported, message = releases.check_kernel(platform.release(),
                                               module_version)
    yield Finding(OK if supported else FAIL, message)


@register('kernel-modules')
def kernel_modules(host: Host) -> Iterator[Finding]:
    """rbd and cas_cache are loaded (``/sys/module``)."""
    if config.ROOT == '/' and simulated(host):
        raise NotChecked('simulated host (casadm -V says it is the '
                         'os-brick-cas host simulator): no kernel module is '
                         'involved')
    for name, role in KERNEL_MODULES.items():
        if os.path.isdir(rooted('/sys/module/%s' % name)):
            yield Finding(OK, 'kernel module %s is loaded' % name)
        else:
            yield Finding(FAIL, 'kernel module %s is not loaded (%s): run '
                                '"modprobe %s" and add it to '
                                '/etc/modules-load.d/ so it loads at boot.'
                                % (name, role, name))


def simulated(host: Host) -> bool:
    """Does casadm say it is the os-brick-cas host simulator (casadm -V)?"""
    try:
        return stand_in.is_simulator(host.casadm.version())
    except exception.CasError:
        return False


def _rootwrap_dirs() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(rooted(ROOTWRAP_CONF))
    listed = parser.get('DEFAULT', 'filters_path', fallback='')
    dirs = [d.strip() for d in listed.split(',') if d.strip()]
    return [rooted(d) for d in dirs or ROOTWRAP_DIRS]


def _filter_lines(directory: str) -> dict[str, tuple[str, str]]:
    """privsep context -> (file, filter definition) in *directory*."""
    found = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not (name.endswith('.filters') and os.path.isfile(path)):
            continue
        with open(path) as filters:
            for line in filters:
                _, sep, definition = line.partition(':')
                for context in PRIVSEP_CONTEXTS:
                    if sep and (', %s,' % context) in definition:
                        found[context] = (path, definition.strip())
    return found


@register('rootwrap-filter')
def rootwrap_filter(host: Host) -> Iterator[Finding]:
    """nova's rootwrap lets nova-compute start both privsep daemons."""
    dirs = [d for d in _rootwrap_dirs() if os.path.isdir(d)]
    if not dirs:
        raise NotChecked("nova's rootwrap filters are not on this file "
                         'system (%s); if nova-compute runs in a container, '
                         'run doctor inside it' % ', '.join(_rootwrap_dirs()))
    found: dict[str, tuple[str, str]] = {}
    for directory in dirs:
        found.update(_filter_lines(directory))
    for context in PRIVSEP_CONTEXTS:
        if context not in found:
            yield Finding(FAIL, 'no rootwrap filter for %s in %s: nova-'
                                'compute cannot start that privsep daemon '
                                '(%s). Copy etc/rootwrap.d/os-brick-cas.'
                                'filters into %s.' % (
                                    context, ', '.join(dirs),
                                    'write-back detaches fail' if
                                    context.endswith('flush') else
                                    'cached attaches fail', dirs[0]))
        elif found[context][1] != FILTER % context:
            yield Finding(WARN, 'the rootwrap filter for %s in %s differs '
                                'from the one os-brick-cas ships; replace '
                                'it with etc/rootwrap.d/os-brick-cas.filters '
                                'of this release.' % (context,
                                                      found[context][0]))
        else:
            yield Finding(OK, 'rootwrap filter for %s in %s' % (
                context, found[context][0]))


@register('udev-rule')
def udev_rule(host: Host) -> Iterator[Finding]:
    """The udev rule naming krbd devices is installed and its namer exists."""
    if config.ROOT == '/' and simulated(host):
        raise NotChecked('simulated host (casadm -V says it is the '
                         'os-brick-cas host simulator): udev never sees its '
                         'devices (the connector or the stand-in rbd makes '
                         'the /dev/disk/by-id links)')
    paths = [rooted(os.path.join(d, UDEV_RULE)) for d in UDEV_DIRS]
    installed = [path for path in paths if os.path.isfile(path)]
    if not installed:
        yield Finding(WARN, 'udev rule %s is not installed (%s): the '
                            'connector creates the /dev/disk/by-id links '
                            'itself, but links of devices mapped outside '
                            'os-brick-cas are missing. Run "%s" and '
                            '"udevadm control --reload".'
                            % (UDEV_RULE, ', '.join(UDEV_DIRS), INSTALL_RULE))
        return
    with open(installed[0]) as rule:
        text = rule.read()
    # each PROGRAM's command must be executable and the files it names
    # (the namer module of ``<python> -I -S <file>``) readable
    needed = [(path, os.X_OK if index == 0 else os.R_OK)
              for program in re.findall(r'PROGRAM="([^"]*)"', text)
              for index, path in enumerate(program.split())
              if path.startswith('/')]
    if not NOWATCH.search(text):
        yield Finding(WARN, 'udev rule %s does not turn udev\'s watch off '
                            'for /dev/cas* (OPTIONS:="nowatch"): each time '
                            'a writer such as QEMU closes a cached disk, '
                            'udev reads it through the page cache, and on '
                            'Open CAS v26.03 such reads can lose write-back '
                            'writes (doc/source/admin/'
                            'opencas-hit-invalid-race.rst). '
                            'Run "%s" (this release\'s rule) and "udevadm '
                            'control --reload".'
                            % (installed[0], INSTALL_RULE))
    missing = [path for path, mode in needed
               if not os.access(rooted(path), mode)]
    if missing:
        yield Finding(WARN, 'udev rule %s runs %s, which is not '
                            'here: udev creates no by-id link '
                            '(the connector then creates it itself). Run '
                            '"%s" with this installation\'s os-brick-cas (it '
                            'writes its namer\'s path into the rule) and '
                            '"udevadm control --reload".'
                            % (installed[0], missing[0], INSTALL_RULE))
    else:
        yield Finding(OK, 'udev rule %s is installed' % installed[0])


@register('state-path')
def state_path(host: Host) -> Iterator[Finding]:
    """state_path is a root-owned directory only root can write."""
    path = host.conf[opts.GROUP].state_path
    try:
        info = os.stat(path)
    except FileNotFoundError:
        yield Finding(WARN, '[os_brick_cas] state_path %s does not exist: '
                            'the first cached attach creates it; create it '
                            '(root, mode 0755) on persistent storage.' % path)
        return
    problems = []
    if not stat.S_ISDIR(info.st_mode):
        problems.append('is not a directory')
    if info.st_uid != 0:
        problems.append('is owned by uid %d, not root' % info.st_uid)
    if info.st_mode & 0o022:
        problems.append('is writable by group or others (mode %o)'
                        % stat.S_IMODE(info.st_mode))
    if not os.access(path, os.W_OK):
        problems.append('is not writable by this command')
    if problems:
        yield Finding(FAIL, '[os_brick_cas] state_path %s %s: it holds the '
                            'ownership records that decide whose cached '
                            'data may reach Ceph. Make it a root-owned '
                            'directory (chown root:root; chmod 0755).'
                            % (path, ' and '.join(problems)))
    else:
        yield Finding(OK, 'state_path %s is a root-owned directory' % path)


@register('configuration')
def configuration(host: Host) -> Iterator[Finding]:
    """Which files were read, and whether they configure any instance."""
    read = ', '.join(host.config_files) or 'none'
    try:
        host.policy()
    except NotChecked as exc:
        yield Finding(FAIL, 'no configuration found; pass --config-file '
                            "(nova-compute's nova.conf with [os_brick_cas] "
                            'cache_instances): %s (files read: %s). No '
                            'advice about volumes is given without it.'
                            % (exc, read))
        return
    yield Finding(OK, 'configuration: cache_instances %s (files read: %s)'
                  % (','.join('%s:%s' % item for item in sorted(
                      host.conf[opts.GROUP].cache_instances.items())), read))
