#!/usr/bin/env python3
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

"""Write a constraints file for one supported OpenStack release.

Pins (``name===version``) every distribution our requirement files name and
everything those need. For the newest release (tools/upper-constraints.txt)
the pins are read from the environment it runs in (run it with the
project's .venv python after tools/setup-env.sh has passed the tests)::

    .venv/bin/python tools/generate-upper-constraints.py

For an older release the pins are pip's resolution (``pip install
--dry-run --report``, nothing is installed) of the requirement files plus
that release's nova, cinder, os-brick and placement (:data:`RELEASES`),
with every other distribution as PyPI offered it on the release date,
written to tools/upper-constraints-<release>.txt::

    .venv/bin/python tools/generate-upper-constraints.py --release 2025.1

The requirement files keep lower bounds only; tox, tools/setup-env.sh and
CI install with ``-c`` of the release's file.
"""

import argparse
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ['requirements.txt', 'test-requirements.txt', 'doc/requirements.txt']
OUTPUT = os.path.join(ROOT, 'tools', 'upper-constraints.txt')
SELF = canonicalize_name('os-brick-cas')

#: OpenStack release -> its release date and the service versions it is
#: tested with (the newest PyPI patch release of each series). Everything
#: else is resolved as PyPI offered it on the release date, as OpenStack's
#: own constraints froze it then, except :data:`TODAYS`.
RELEASES = {
    '2025.1': {'date': '2025-04-02',
               'pins': {'nova': '31.3.1', 'cinder': '26.3.0',
                        'os-brick': '6.11.1',
                        'openstack-placement': '13.0.1'}},
    '2026.1': {'date': '2026-04-01',
               'pins': {'nova': '33.0.2', 'cinder': '28.0.0',
                        'os-brick': '7.0.0',
                        'openstack-placement': '15.0.0'}},
    '2026.2': {'date': '2026-10-07',
               'pins': {'nova': '34.0.0', 'cinder': '29.0.0',
                        'os-brick': '7.1.1',
                        'openstack-placement': '16.0.0'}},
}
CURRENT = '2026.2'
#: taken at the version tools/upper-constraints.txt tests for every
#: release: tempest is branchless, mfusepy (simulator) is not OpenStack's;
#: PyPI serves some files without an upload date, which the date does not
#: hold back: cursive's older releases need elliptic curves today's
#: cryptography no longer has, and setuptools 81+ lacks the pkg_resources
#: older pbr imports
TODAYS = ['tempest', 'mfusepy', 'cursive', 'setuptools']
#: caps every release shares (see test-requirements.txt): SQLAlchemy 2.1's
#: deprecations are errors under nova's warnings fixture
CAPS = ['SQLAlchemy<2.1']


def output_for(release: str) -> str:
    """The constraints file of a release."""
    if release == CURRENT:
        return OUTPUT
    return os.path.join(ROOT, 'tools', 'upper-constraints-%s.txt' % release)


def requirements() -> list[Requirement]:
    """Every requirement line of the project's requirement files."""
    found = []
    for name in FILES:
        with open(os.path.join(ROOT, name)) as reqs:
            for line in reqs:
                line = re.sub(r'\s#.*|^#.*', '', line).strip()
                if line and not line.startswith('-'):
                    found.append(Requirement(line))
    return found


def direct_requirements() -> list[str]:
    return [req.name for req in requirements()]


def closure(names: list[str]) -> dict[str, str]:
    pins: dict[str, str] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in pins or name == SELF:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            sys.exit('%s is not installed here: run tools/setup-env.sh '
                     'first' % name)
        pins[name] = dist.version
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({'extra': ''}):
                todo.append(req.name)
    return pins


def pinned(path: str) -> dict[str, str]:
    """name -> version of a constraints file."""
    with open(path) as f:
        return dict(line.strip().split('===') for line in f
                    if '===' in line)


def pip(*args: str) -> None:
    subprocess.run([sys.executable, '-m', 'pip'] + list(args), check=True)


def resolved(release: str) -> dict[str, str]:
    """pip's resolution of our requirements with a release's services.

    The pinned services are downloaded first and handed to the resolver as
    files, so a patch release newer than the release date is used while
    every other distribution is taken as of that date.
    """
    info = RELEASES[release]
    pins = dict(info['pins'])
    pins.update((name, pinned(OUTPUT)[canonicalize_name(name)])
                for name in TODAYS)
    with tempfile.TemporaryDirectory() as tmp:
        pip('download', '-q', '--no-deps', '-d', tmp,
            *('%s==%s' % item for item in pins.items()))
        files = sorted(os.path.join(tmp, f) for f in os.listdir(tmp))
        report = os.path.join(tmp, 'report.json')
        pip('install', '-q', '--dry-run', '--ignore-installed',
            '--uploaded-prior-to', info['date'] + 'T23:59:59Z',
            '--report', report,
            *('-r%s' % os.path.join(ROOT, name) for name in FILES),
            *files, *CAPS)
        with open(report) as f:
            installs = json.load(f)['install']
    return {canonicalize_name(item['metadata']['name']):
            item['metadata']['version'] for item in installs
            if canonicalize_name(item['metadata']['name']) != SELF}


def write(path: str, pins: dict[str, str], origin: str) -> None:
    with open(path, 'w') as out:
        out.write('# Generated by tools/generate-upper-constraints.py from '
                  '%s;\n# do not edit by hand.\n' % origin)
        for name in sorted(pins):
            out.write('%s===%s\n' % (name, pins[name]))
    print('%d pins written to %s' % (len(pins), path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--release', choices=sorted(RELEASES),
                        help='resolve this release with pip instead of '
                        'reading this environment (default: %s, read from '
                        'the environment)' % CURRENT)
    release = parser.parse_args().release
    if release is None:
        write(OUTPUT, closure(direct_requirements()),
              'the environment the\n# test suite passed in')
    else:
        write(output_for(release), resolved(release),
              'the requirement files\n# and OpenStack %s (%s)' % (
                  release, ', '.join('%s %s' % item for item in
                                     RELEASES[release]['pins'].items())))


if __name__ == '__main__':
    main()
