# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""Compare an upstream run's failing tests with the expected differences.

Usage: python -m tests.upstream.check PART < failing-test-ids

Each supported release has its own list: expected_differences.csv for the
newest, expected_differences-<release>.csv for an older one, chosen by the
installed distribution the part tests (os-brick, cinder or nova).

Exits non-zero on a failure not in the list AND on a listed difference
that no longer fails (delete its row), so the list stays honest.
"""

import csv
import os
import re
import sys

from os_brick_cas import compat

HERE = os.path.dirname(__file__)
LIST = os.path.join(HERE, 'expected_differences.csv')
#: part -> the distribution whose release picks the list
DISTRIBUTION = {'brick': 'os-brick', 'cinder': 'cinder', 'nova': 'nova'}


def list_for(part: str) -> str:
    """The expected-difference list of the release installed for *part*."""
    release = compat.release_of(DISTRIBUTION[part])
    if release == compat.NEWEST:
        return LIST
    return os.path.join(HERE, 'expected_differences-%s.csv' % release)


def expected(part: str) -> list:
    """(regex, status, reason) rows of one part."""
    with open(list_for(part), newline='') as f:
        rows = [r for r in csv.DictReader(
            line for line in f if not line.startswith('#'))]
    return [(re.compile(r['test_id_regex'] + r'\Z'), r['status'],
             r['reason']) for r in rows if r['part'] == part]


def main(part: str) -> int:
    failing = sorted({line.strip() for line in sys.stdin if line.strip()})
    rows = expected(part)
    unexpected = [t for t in failing
                  if not any(rx.match(t) for rx, _, _ in rows)]
    stale = [rx.pattern for rx, _, _ in rows
             if not any(rx.match(t) for t in failing)]
    for rx, status, reason in rows:
        hits = [t for t in failing if rx.match(t)]
        if hits:
            print('expected difference (%s, %d tests): %s\n    %s'
                  % (status, len(hits), reason, rx.pattern[:-2]))
    for test in unexpected:
        print('UNEXPECTED FAILURE: %s' % test)
    for pattern in stale:
        print('NO LONGER FAILS (delete its row in %s): %s'
              % (os.path.basename(list_for(part)), pattern[:-2]))
    return 1 if unexpected or stale else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
