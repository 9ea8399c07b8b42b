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

"""Open CAS defects, known to os-brick-cas, and what the host really runs.

A cache mode whose writes a data-loss defect can lose is not offered on a
host whose loaded Open CAS module has it (:mod:`os_brick_cas.policy`
treats the instance as unusable for that mode, so the fallback policy
decides, doctor fails and nova reports no trait for it) unless the operator
names the defect in ``[os_brick_cas] accepted_data_loss_defects``. Cores
that already exist are never stranded: re-attach, flush and detach go on.
A crash defect (the host can go down, no acknowledged write is lost) is
only warned about: doctor and ``host plan``/``apply`` say what to do.

The release is read from ``/sys/module/cas_cache/version`` (MODULE_VERSION
of the loaded module; no root, no casadm call). A defect counts as fixed
when the loaded module is a build whose manifest lists the fix: the
manifest ``/usr/lib/opencas/os-brick-cas-build.json`` (written by the
os_brick_cas role's and the devstack plugin's build, which apply the
patch series of ``deploy/ansible/roles/os_brick_cas/files/opencas-patches``)
names the fixed defect keys and the built module's srcversion, and
``/sys/module/cas_cache/srcversion`` of the loaded module must be that
srcversion. Any other module (unpatched, another build, no manifest, a
module loaded before the patched one was installed) keeps the gate.
"""

import dataclasses
import json
import os
from typing import Optional

from oslo_config import cfg

from os_brick_cas import modes
from os_brick_cas.opencas import releases
from os_brick_cas import opts

VERSION_FILE = 'sys/module/cas_cache/version'
SRCVERSION_FILE = 'sys/module/cas_cache/srcversion'
MANIFEST_FILE = 'usr/lib/opencas/os-brick-cas-build.json'
#: cas_cache's ``use_io_scheduler`` (0440, so readable by root only). At 0
#: every Open CAS release we know (v24.9 to v26.03) sends write-through and
#: write-around write hits down OCF's write-back fast path: they stay dirty
#: in the cache and do not reach Ceph (OCF ocf_core.c,
#: _ocf_core_req_resolve_fast_mode; shown in OCF's pyocf on v26.03.2).
SCHEDULER_FILE = 'sys/module/cas_cache/parameters/use_io_scheduler'
#: the modes whose write hits that setting leaves dirty
LAZY_WITHOUT_SCHEDULER = (modes.CacheMode.WRITE_THROUGH,
                          modes.CacheMode.WRITE_AROUND)

#: a defect that can lose acknowledged writes: the mode is not offered
DATA_LOSS = 'data-loss'
#: a defect that can crash the host, losing no acknowledged write: warned
CRASH = 'crash'


@dataclasses.dataclass(frozen=True)
class Defect:
    """One defect: the release lines it is in and the modes it can hurt."""

    key: str
    introduced: tuple[int, int]
    fixed: Optional[tuple[int, int]]
    modes: tuple[modes.CacheMode, ...]
    summary: str
    kind: str = DATA_LOSS
    #: what an operator does about it (crash defects' warning)
    advice: str = ''

    def affects(self, release: Optional[tuple[int, int]]) -> bool:
        return release is not None and release >= self.introduced and (
            self.fixed is None or release < self.fixed)


DEFECTS = (
    Defect(
        key='ocf-hit-invalid-backfill',
        introduced=(26, 3),
        fixed=None,
        modes=(modes.CacheMode.WRITE_BACK, modes.CacheMode.WRITE_ONLY),
        summary='a read that waited for its cache-line lock behind a '
                'write-back write (lines whose first write is in flight, or '
                'lines larger than the IO) is re-checked without its '
                'LOOKUP_HIT_INVALID lines, takes the miss path and '
                'backfills the old data from Ceph over the dirty lines, so '
                'the flush writes the old data back over the acknowledged '
                'write; wo reads return stale data the same way (OCF '
                'ocf_engine_update_req_info() since OCF 36d2dfcc; '
                'reproduced on v26.03.2 by tests/kernel/test_reader_race.py; '
                'fixed by the os_brick_cas role\'s v26.03.2 patch 0001; no '
                'fixed upstream release known)'),
    Defect(
        key='ocf-alock-read-holders',
        introduced=(26, 3),
        fixed=None,
        modes=tuple(modes.CacheMode),
        kind=CRASH,
        summary='the 8-bit cache-line lock counter lets a 255th concurrent '
                'reader of one cache line through onto the value that means '
                'write-locked, and the next read unlock hits a kernel BUG in '
                'ocf_alock_unlock_one_rd (Open CAS issue #1771, v26.03.2 '
                'and v26.03.3; fixed by the os_brick_cas role\'s v26.03.2 '
                'patch 0002)',
        advice='a host crash under very many concurrent reads of one hot '
               'line, in every mode; dirty data survives in the cache '
               'metadata, no acknowledged write is lost. Build Open CAS with '
               'the os_brick_cas role (its v26.03.2 patch series fixes it) '
               'or run v25.12.2 or v24.9'),
)


@dataclasses.dataclass(frozen=True)
class LoadedModule:
    """What the host's loaded cas_cache module is, as far as files say."""

    version: Optional[str]
    srcversion: Optional[str]
    #: defect keys fixed in the loaded module (its build manifest)
    fixed: frozenset[str]
    #: why the manifest's fixes count or not (doctor's note)
    note: str


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as text_file:
            return text_file.read().strip() or None
    except OSError:
        return None


def _root(conf: cfg.ConfigOpts) -> str:
    return conf[opts.GROUP].host_root


def loaded_version(conf: cfg.ConfigOpts = cfg.CONF) -> Optional[str]:
    """The loaded cas_cache module's version, None if it is not loaded."""
    return _read(os.path.join(_root(conf), VERSION_FILE))


def use_io_scheduler(conf: cfg.ConfigOpts = cfg.CONF) -> Optional[str]:
    """The loaded module's ``use_io_scheduler``; None if unreadable."""
    return _read(os.path.join(_root(conf), SCHEDULER_FILE))


def read_manifest(conf: cfg.ConfigOpts = cfg.CONF) -> Optional[dict]:
    """The installed build manifest, None if absent or unreadable."""
    text = _read(os.path.join(_root(conf), MANIFEST_FILE))
    if text is None:
        return None
    try:
        manifest = json.loads(text)
    except ValueError:
        return None
    return manifest if isinstance(manifest, dict) else None


def loaded_module(conf: cfg.ConfigOpts = cfg.CONF) -> LoadedModule:
    """The loaded module and the defects its build fixed."""
    version = loaded_version(conf)
    srcversion = _read(os.path.join(_root(conf), SRCVERSION_FILE))
    manifest = read_manifest(conf)
    fixed: frozenset[str] = frozenset()
    if version is None:
        note = 'cas_cache is not loaded'
    elif manifest is None:
        note = 'no build manifest /%s' % MANIFEST_FILE
    elif not srcversion or manifest.get('srcversion') != srcversion:
        note = ('the loaded module (srcversion %s) is not the build of '
                '/%s (srcversion %s): reload it or rebuild' % (
                    srcversion or 'unknown', MANIFEST_FILE,
                    manifest.get('srcversion') or 'unknown'))
    else:
        fixed = frozenset(str(key) for key in manifest.get('fixes') or ())
        patches = [str(patch.get('name')) for patch in
                   manifest.get('patches') or () if isinstance(patch, dict)]
        note = 'the loaded module is the build of /%s (%s)' % (
            MANIFEST_FILE, ', '.join(patches) or 'no patches')
    return LoadedModule(version, srcversion, fixed, note)


def _present(version: Optional[str], fixed: frozenset[str],
             kind: str) -> list[Defect]:
    if version is None:
        return []
    release = releases.major_minor(version)
    return [defect for defect in DEFECTS
            if defect.kind == kind and defect.affects(release) and
            defect.key not in fixed]


def unfixed(module: LoadedModule) -> list[Defect]:
    """Every defect (either kind) the loaded *module* has."""
    return (_present(module.version, module.fixed, DATA_LOSS) +
            _present(module.version, module.fixed, CRASH))


def unaccepted(mode: modes.CacheMode, version: Optional[str],
               conf: cfg.ConfigOpts = cfg.CONF,
               fixed: Optional[frozenset[str]] = None) -> list[Defect]:
    """Data-loss defects of *version* that can lose *mode*'s writes.

    Those neither accepted nor *fixed* (default: what the loaded module's
    build manifest lists, if *version* is the loaded module's).
    """
    if fixed is None:
        module = loaded_module(conf)
        fixed = module.fixed if module.version == version else frozenset()
    accepted = set(conf[opts.GROUP].accepted_data_loss_defects)
    return [defect for defect in _present(version, fixed, DATA_LOSS)
            if mode in defect.modes and defect.key not in accepted]


def crash_defects(version: Optional[str],
                  conf: cfg.ConfigOpts = cfg.CONF,
                  fixed: Optional[frozenset[str]] = None) -> list[Defect]:
    """Crash defects of *version* its build did not fix (warnings)."""
    if fixed is None:
        module = loaded_module(conf)
        fixed = module.fixed if module.version == version else frozenset()
    return _present(version, fixed, CRASH)
