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

"""Failure injection: the Nth call of a verb answers with a scripted fault."""

import signal
import sys
import time
from typing import Any, Optional


def add(state: dict[str, Any], verb: str, exit_code: int = 1,
        stdout: str = '', stderr: str = '', hang: Optional[float] = None,
        nth: int = 1, count: int = 1) -> None:
    """Make calls nth .. nth+count-1 (from now on) of *verb* fail."""
    state['faults'].append({'verb': verb, 'exit_code': exit_code,
                            'stdout': stdout, 'stderr': stderr,
                            'hang': hang, 'nth': nth, 'count': count,
                            'seen': 0})


def take(state: dict[str, Any], verb: str) -> Optional[dict[str, Any]]:
    """Count a call of *verb*; return the fault it triggers, if any."""
    chosen = None
    for fault in state['faults']:
        if fault['verb'] != verb:
            continue
        fault['seen'] += 1
        first = fault['nth']
        if chosen is None and first <= fault['seen'] < first + fault[
                'count']:
            chosen = dict(fault)
    state['faults'] = [f for f in state['faults']
                       if f['seen'] < f['nth'] + f['count'] - 1]
    return chosen


def _interrupted(signum, frame):
    raise KeyboardInterrupt()


#: verbs casadm lets SIGINT interrupt (a flush, and the flush that starts a
#: core removal); it ignores SIGINT in every other verb.
INTERRUPTIBLE = frozenset(('flush-cache', 'flush-core', 'remove-core'))


def play(fault: dict[str, Any]) -> int:
    """Print the fault's output after its hang; return its exit code.

    Like casadm, a hang ignores SIGINT unless it is a flush, so only
    SIGKILL ends a hung list/add/remove/stats call.
    """
    if fault.get('hang'):
        if fault['verb'] in INTERRUPTIBLE:
            signal.signal(signal.SIGINT, _interrupted)
        else:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, _interrupted)
        time.sleep(fault['hang'])
    sys.stdout.write(fault['stdout'])
    sys.stderr.write(fault['stderr'])
    return fault['exit_code']
