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

"""Which kernels each Open CAS release line supports (from its release notes).

The module is built against the running kernel, but a line only supports
kernels up to a known release; a newer kernel may build and still corrupt
write-back data, so ``doctor`` fails on it.
"""

import re
from typing import Optional

#: newest supported kernel (major, minor) per Open CAS line (year, month)
NEWEST_KERNEL: dict[tuple[int, int], tuple[int, int]] = {
    (22, 6): (5, 15),
    (24, 9): (6, 9),
    (25, 3): (6, 14),
    (25, 12): (6, 16),
    (26, 3): (6, 18),
    (26, 9): (7, 2),
}

#: the oldest Open CAS line os-brick-cas drives: per-core flush is
#: ``-F -i I -j J`` from v24.9 (``-E/--flush-core`` up to v22.6.x)
OLDEST_LINE = (24, 9)

_PAIR = re.compile(r'^v?(\d+)\.(\d+)')


def major_minor(version: str) -> Optional[tuple[int, int]]:
    """``(26, 3)`` from ``26.03.2.1032.release``, ``(6, 18)`` from 6.18.4."""
    match = _PAIR.match(version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def _dotted(pair: tuple[int, int]) -> str:
    return '%d.%d' % pair


def _line(pair: tuple[int, int]) -> str:
    """Open CAS's own spelling: v22.6, v24.9, then v25.03 onwards."""
    return '%d.%d' % pair if pair < (25, 0) else '%d.%02d' % pair


def check_kernel(kernel: str, cas_version: str) -> tuple[bool, str]:
    """``(supported, explanation)`` for a kernel and an Open CAS version.

    Unknown lines and unparsable versions are not supported: the caller
    decides how loud to be.
    """
    line = major_minor(cas_version)
    running = major_minor(kernel)
    if line is None or running is None:
        return False, ('cannot tell whether kernel %s is supported by Open '
                       'CAS %s (unrecognised version); check the Open CAS '
                       'release notes.' % (kernel, cas_version))
    newest = NEWEST_KERNEL.get(line)
    if newest is None:
        known = ', '.join(_line(k) for k in sorted(NEWEST_KERNEL))
        return False, ('Open CAS %s is not a release line os-brick-cas knows '
                       '(%s); check its release notes for kernel %s.' % (
                           cas_version, known, kernel))
    if running <= newest:
        return True, ('kernel %s is supported by Open CAS %s (up to %s)' % (
            kernel, _line(line), _dotted(newest)))
    fits = [k for k, v in sorted(NEWEST_KERNEL.items()) if running <= v]
    advice = ('upgrade Open CAS to %s or newer' % _line(fits[0])
              if fits else 'no Open CAS line supports it yet')
    return False, ('kernel %s is newer than Open CAS %s supports (up to %s): '
                   '%s, or boot a supported kernel, before caching volumes '
                   'in write-back.' % (kernel, _line(line),
                                       _dotted(newest), advice))


def check_cli(cli_version: str) -> tuple[bool, str]:
    """``(supported, explanation)`` for the casadm release (``-V``)."""
    line = major_minor(cli_version)
    if line is None:
        return False, ('cannot tell the casadm release from %r; os-brick-cas '
                       'needs Open CAS %s or newer.'
                       % (cli_version, _line(OLDEST_LINE)))
    if line < OLDEST_LINE:
        return False, ('casadm %s is older than Open CAS %s, the oldest '
                       'release os-brick-cas supports: its per-core flush is '
                       '-E, so detaching a write-back volume could not flush '
                       'it (the detach is refused, data stays in the cache). '
                       'Upgrade Open CAS to %s or newer before caching '
                       'volumes.' % (cli_version, _line(OLDEST_LINE),
                                     _line(OLDEST_LINE)))
    return True, 'casadm %s is Open CAS %s or newer' % (
        cli_version, _line(OLDEST_LINE))


def same_release_line(versions: dict[str, str]) -> list[tuple[str, str]]:
    """FAIL when casadm and the loaded module are of different releases.

    *versions* is what ``casadm -V`` reports. casadm talks to the module
    through ioctls of its own release; a casadm built for another line
    (e.g. in a container image) may misread or misapply them.
    """
    cli = versions.get('CAS CLI Utility', '')
    module = versions.get('CAS Cache Kernel Module', '')
    cli_line, module_line = major_minor(cli), major_minor(module)
    if cli_line is None or module_line is None or cli_line == module_line:
        return []
    return [('FAIL', 'casadm %s and the cas_cache module %s are of '
                     'different Open CAS releases: install casadm of the '
                     "module's release (in a container: rebuild the image "
                     'with deploy/kolla/template-overrides.j2 set to it).'
             % (cli, module))]
