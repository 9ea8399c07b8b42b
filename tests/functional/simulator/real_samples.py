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

"""The recorded real casadm calls (tests/data/real-casadm) as test data."""

import os
import shlex

REAL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'data', 'real-casadm')
#: a -P of a cache (047) and of a core (049) on v26.03.2, with dirty data
CACHE_STATS = '047-casadm-P-dirty-immediate.txt'
CORE_STATS = '049-casadm-P-core-dirty.txt'


def real_sample(name: str, release: str = 'v26.03.2'
                ) -> tuple[list[str], int, str, str]:
    """(argv, exit code, stdout, stderr) of one recorded real call."""
    with open(os.path.join(REAL, release, name)) as sample:
        text = sample.read()
    command, rest = text.split('\n--- exit code: ', 1)
    code, rest = rest.split('\n--- stdout:\n', 1)
    out, err = rest.split('--- stderr:\n', 1)
    argv = shlex.split(command[2:])
    if argv[0] == 'timeout':
        argv = argv[2:]
    return argv, int(code), out, err


def header(name: str) -> list[str]:
    """The column titles of a recorded ``-P -o csv``."""
    return real_sample(name)[2].splitlines()[0].split(',')
