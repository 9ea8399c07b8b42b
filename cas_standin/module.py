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


"""The loaded cas_cache module's files, as a real host shows them.

``/sys/module/cas_cache/version`` and ``srcversion`` of the loaded module,
and the build manifest the os_brick_cas role installs
(``/usr/lib/opencas/os-brick-cas-build.json``: release, patches, the
defect keys they fix, the built module's srcversion), all under a host
root (``[os_brick_cas] host_root``). A patched build's module has another
srcversion than the release's unpatched one, as on a real host.
"""

import hashlib
import json
import os
from typing import Optional, Sequence

#: the role's v26.03.2 series: patch file -> defect key it fixes
SERIES = {
    '26.03': (('0001-engine-recheck-hit-invalid-on-resume.patch',
               'ocf-hit-invalid-backfill'),
              ('0002-alock-limit-read-lock-holders.patch',
               'ocf-alock-read-holders')),
}

VERSION_FILE = 'sys/module/cas_cache/version'
SRCVERSION_FILE = 'sys/module/cas_cache/srcversion'
#: the module parameter os-brick-cas checks, as the real module exposes it
SCHEDULER_FILE = 'sys/module/cas_cache/parameters/use_io_scheduler'
MANIFEST_FILE = 'usr/lib/opencas/os-brick-cas-build.json'


def srcversion(version: str, patches: Sequence[str]) -> str:
    """A stand-in srcversion: modpost's is 23 hex digits of the sources."""
    digest = hashlib.md5('\n'.join([version, *patches]).encode(),
                         usedforsecurity=False).hexdigest()
    return digest[:23].upper()


def _write(root: str, relative: str, text: str) -> None:
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as out:
        out.write(text)


def build(root: str, version: str, patched: bool = True) -> dict:
    """Install a build's manifest (the role's series when *patched*)."""
    line = '.'.join(version.split('.')[:2])
    series = SERIES.get(line, ()) if patched else ()
    names = [name for name, _ in series]
    manifest = {
        'format': 1,
        'release': 'v' + '.'.join(version.split('.')[:3]),
        'version': version,
        'kernel': 'simulated',
        'patches': [{'name': name,
                     'sha256': hashlib.sha256(name.encode()).hexdigest()}
                    for name in names],
        'fixes': [key for _, key in series],
        'srcversion': srcversion(version, names),
    }
    _write(root, MANIFEST_FILE, json.dumps(manifest, indent=4) + '\n')
    return manifest


def load(root: str, version: str,
         manifest: Optional[dict] = None, use_io_scheduler: int = 1) -> None:
    """Load a module: the manifest's build, else the release unpatched."""
    _write(root, VERSION_FILE, version + '\n')
    _write(root, SRCVERSION_FILE, (
        manifest['srcversion'] if manifest else srcversion(version, ()))
        + '\n')
    _write(root, SCHEDULER_FILE, '%d\n' % use_io_scheduler)


def unload(root: str) -> None:
    """Unload the module (its sysfs directory goes)."""
    for relative in (VERSION_FILE, SRCVERSION_FILE, SCHEDULER_FILE):
        path = os.path.join(root, relative)
        if os.path.exists(path):
            os.unlink(path)
