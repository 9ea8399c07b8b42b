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

"""The package's host files, rendered for this installation.

pip installs the files a host needs outside Python (setup.cfg's
data_files) under ``<prefix>/share/os-brick-cas/etc``, where the prefix is
a virtualenv, ``/usr/local`` (pip with Debian's system Python) or ``/usr``
(a distribution package). Two of them name a command of the package: the
udev rule runs ``os-brick-cas-rbd-namer`` and the exporter's systemd unit
``os-brick-cas``. :func:`plan` finds the installed copies and the
commands through the package's own record (importlib.metadata), so the
rendered files name the real paths wherever pip put them.

The rule runs the namer as ``<python> -I -S <.../os_brick_cas/rbd_names.py>``
rather than through its console script: udev runs it on every add and
change event of an rbd device and waits for it, and a console script
starts with the site module, which runs every ``.pth`` file of the
environment (an OpenStack virtualenv has several; one imports importlib's
machinery). The namer needs the standard library only. Measured: 80 ms
against 14 ms per start on the CI host, 8.8 s against 2.4 s in the TCG
guest, where it was half the time of an ``rbd map``.
"""

import dataclasses
import importlib.metadata
import os
import re
import shutil
import sysconfig
import tempfile
from typing import Callable, Optional

from os_brick_cas import rbd_names

DIST = 'os-brick-cas'
SHARE = os.path.join('share', 'os-brick-cas', 'etc')
NAMER = 'os-brick-cas-rbd-namer'
CLI = 'os-brick-cas'
#: the source tree (a checkout run without installing): etc/ beside the
#: os_brick_cas package, two levels above this module
TREE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'etc')

UDEV_RULE = 'udev-rule'
ROOTWRAP_FILTER = 'rootwrap-filter'
NOVA_DROPIN = 'nova-compute-dropin'
EXPORTER_UNIT = 'exporter-unit'
KINDS = (UDEV_RULE, ROOTWRAP_FILTER, NOVA_DROPIN, EXPORTER_UNIT)

#: kind: (path under share/os-brick-cas/etc, path under the tree's etc/)
SOURCES = {
    UDEV_RULE: ('udev/rules.d/60-os-brick-cas-rbd.rules',
                'udev/rules.d/60-os-brick-cas-rbd.rules'),
    ROOTWRAP_FILTER: ('nova/rootwrap.d/os-brick-cas.filters',
                      'rootwrap.d/os-brick-cas.filters'),
    NOVA_DROPIN: ('systemd/system/nova-compute.service.d/os-brick-cas.conf',
                  'systemd/nova-compute.service.d/os-brick-cas.conf'),
    EXPORTER_UNIT: ('systemd/system/os-brick-cas-exporter.service',
                    'systemd/os-brick-cas-exporter.service'),
}
EXPORTER_UNIT_NAME = 'os-brick-cas-exporter.service'


class HostFilesError(Exception):
    """The package's files or commands cannot be found."""


@dataclasses.dataclass
class HostFile:
    """One file to install: where it goes and what it holds."""

    kind: str
    source: str
    dest: str
    content: str

    def differs(self, root: str = '/') -> bool:
        """Whether the installed copy under *root* is missing or other."""
        try:
            with open(_under(root, self.dest)) as installed:
                return installed.read() != self.content
        except FileNotFoundError:
            return True

    def install(self, root: str = '/') -> None:
        """Write it atomically (0644, parents 0755)."""
        path = _under(root, self.dest)
        directory = os.path.dirname(path)
        os.makedirs(directory, mode=0o755, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=directory,
                                        prefix='.os-brick-cas-')
        try:
            with os.fdopen(handle, 'w') as out:
                out.write(self.content)
            os.chmod(temp, 0o644)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip('/'))


def _record() -> list[str]:
    """Absolute paths of the files pip recorded for the package."""
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        return []
    return [os.path.normpath(str(dist.locate_file(name)))
            for name in dist.files or []]


def share_dir(record: Optional[list[str]] = None) -> str:
    """``<prefix>/share/os-brick-cas/etc`` of the installed package."""
    record = _record() if record is None else record
    marker = os.sep + os.path.join(SHARE, SOURCES[UDEV_RULE][0])
    for path in record:
        if path.endswith(marker):
            return path[:-len(marker) + 1] + SHARE
    candidates = [os.path.join(sysconfig.get_path('data'), SHARE),
                  os.path.join('/usr/local', SHARE), os.path.join('/usr',
                                                                  SHARE)]
    for candidate in candidates:
        if os.path.isfile(os.path.join(candidate, SOURCES[UDEV_RULE][0])):
            return candidate
    if os.path.isfile(os.path.join(TREE, SOURCES[UDEV_RULE][1])):
        return TREE
    raise HostFilesError(
        'cannot find the package\'s files (%s under the installation '
        'prefix, e.g. /usr/local or the virtualenv): reinstall os-brick-cas '
        'with pip' % SHARE)


def command_path(name: str, record: Optional[list[str]] = None) -> str:
    """The absolute path of the package's console script *name*."""
    record = _record() if record is None else record
    for path in record:
        if os.path.basename(path) == name and \
                os.path.basename(os.path.dirname(path)) == 'bin':
            return path
    for directory in (sysconfig.get_path('scripts'),):
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return os.path.abspath(found)
    raise HostFilesError('cannot find the command %s of the package: '
                         'reinstall os-brick-cas with pip' % name)


#: the second line of pip's console script when the interpreter's path is
#: too long for a shebang: ``#!/bin/sh`` then ``'''exec' <python> "$0" "$@"``
SH_EXEC = "'''exec' "


def _interpreter(script: str) -> str:
    """The Python a console script runs, from its first lines."""
    try:
        with open(script) as handle:
            head = [handle.readline() for _ in range(2)]
    except (OSError, UnicodeDecodeError) as exc:
        raise HostFilesError('cannot read %s: %s (reinstall os-brick-cas '
                             'with pip)' % (script, exc))
    shebang = head[0][2:].strip() if head[0].startswith('#!') else ''
    if shebang == '/bin/sh' and head[1].startswith(SH_EXEC):
        shebang = head[1][len(SH_EXEC):].split(' "$0"')[0].strip()
    if not shebang.startswith('/'):
        raise HostFilesError('%s names no interpreter (first line %r): '
                             'reinstall os-brick-cas with pip'
                             % (script, head[0].strip()))
    return shebang


def namer_program(record: Optional[list[str]] = None) -> str:
    """The udev rule's PROGRAM, without its ``%n``.

    The namer module, run with ``-I -S`` by the Python of the package's
    console script.
    """
    record = _record() if record is None else record
    python = _interpreter(command_path(NAMER, record))
    suffix = os.sep + os.path.join('os_brick_cas', 'rbd_names.py')
    module = next((path for path in record if path.endswith(suffix)),
                  os.path.abspath(rbd_names.__file__))
    for path in (python, module):
        if re.search(r'[\s"%$]', path):
            raise HostFilesError(
                'udev cannot run %s: its path holds a blank, a quote, %% '
                'or $ (install os-brick-cas under a plain path)' % path)
    return '%s -I -S %s' % (python, module)


def render_udev_rule(text: str, namer: str) -> str:
    """The udev rule with its PROGRAM at *namer* (:func:`namer_program`)."""
    rendered, count = re.subn(r'PROGRAM="[^ "]*' + re.escape(NAMER),
                              lambda _: 'PROGRAM="' + namer, text)
    if not count:
        raise HostFilesError('the udev rule names no %s' % NAMER)
    return rendered


def render_exporter_unit(text: str, cli: str) -> str:
    """The exporter unit with ExecStart running *cli*."""
    rendered, count = re.subn(r'^ExecStart=\S*' + re.escape(CLI) + ' ',
                              lambda _: 'ExecStart=' + cli + ' ', text,
                              flags=re.MULTILINE)
    if not count:
        raise HostFilesError('the exporter unit has no ExecStart of %s'
                             % CLI)
    return rendered


def plan(kinds: tuple[str, ...] = KINDS,
         rootwrap_dir: str = '/etc/nova/rootwrap.d',
         nova_compute_units: tuple[str, ...] = ('nova-compute.service',),
         record: Optional[list[str]] = None,
         udev_rules_dir: str = '/etc/udev/rules.d') -> list[HostFile]:
    """The files to install, rendered for this installation."""
    record = _record() if record is None else record
    share = share_dir(record)
    index = 1 if share == TREE else 0
    renderers: dict[str, Callable[[str], str]] = {}
    if UDEV_RULE in kinds:
        namer = namer_program(record)
        renderers[UDEV_RULE] = lambda text: render_udev_rule(text, namer)
    if EXPORTER_UNIT in kinds:
        cli = command_path(CLI, record)
        renderers[EXPORTER_UNIT] = lambda text: render_exporter_unit(
            text, cli)
    dests = {
        UDEV_RULE: [os.path.join(udev_rules_dir,
                                 '60-os-brick-cas-rbd.rules')],
        ROOTWRAP_FILTER: [os.path.join(rootwrap_dir, 'os-brick-cas.filters')
                          ] if rootwrap_dir else [],
        NOVA_DROPIN: ['/etc/systemd/system/%s.d/os-brick-cas.conf' % unit
                      for unit in nova_compute_units],
        EXPORTER_UNIT: ['/etc/systemd/system/' + EXPORTER_UNIT_NAME],
    }
    files = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        source = os.path.join(share, SOURCES[kind][index])
        try:
            with open(source) as handle:
                text = handle.read()
        except OSError as exc:
            raise HostFilesError('cannot read %s: %s (reinstall '
                                 'os-brick-cas)' % (source, exc))
        content = renderers.get(kind, lambda same: same)(text)
        files += [HostFile(kind, source, dest, content)
                  for dest in dests[kind]]
    return files
