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

"""The life cycle of one cached volume on this host, in one package.

The rule that holds at every instant, across crashes: **what Cinder
believes about a volume is never stronger than what this host
guarantees.** "Drained for attachment A" in Cinder means A's core holds no
dirty data and cannot get any; "owned by host H, epoch E" means only H
may write the volume's cached data to Ceph.

Where each part is:

* :mod:`.states`: the states (stable or in flight), the events and the
  table, each row naming who sends it; the admin guide's tables are
  checked against it by a test.
* :mod:`.transitions`: :func:`~.transitions.advance`, the one writer of
  states (checks the event against the table, writes the journal), and
  the multi-step transitions (drain, undrain, resolve, release, reclaim).
* :mod:`.marker`: Cinder's view (the fence marker) and the attach/detach
  protocol on it (claim, undo, clear).
* :mod:`.host`: observation of the host (the one way to find a volume's
  core; the state a fresh listing shows).
* :mod:`.journal`: one record per volume with a transition in flight.
* :mod:`.drift`: what differs between the host and its records.

How the rule holds:

* One per-volume inter-process lock (:func:`locks.volume_lock`) around
  every transition, taken by nova-compute and the CLI alike; the
  instance lock (IO-class changes, flushes) is taken inside it.
* Ordering: Cinder is told a weaker guarantee *before* the host weakens
  it (the marker goes to "caching" by compare-and-swap before the drain
  class goes, or before an attach adds a core that may cache), and a
  stronger one only *after* a fresh listing shows the host holds it. If
  Cinder cannot be told, a weakening transition does not happen.
* A journal: an unfinished transition (its process died, its lock is
  free) is resolved by the next path that needs the volume (attach,
  detach, drain, undrain, the CLI) and by nova-compute's periodic task.

Why not openstack's ``automaton`` (ironic's ``states.py``): an automaton
FSM holds *one current state in memory* and advances it. Here the state
of a volume is not held by any object: every transition re-derives it,
under the volume lock, from the journal and a fresh listing of the host
(another process may have changed it since), and a process that dies
mid-way leaves only its journal record. So the table is a plain dict of
rows (:data:`TRANSITIONS`), checked and journaled by one function;
automaton would add a dependency to do a dict lookup on a throw-away
machine per call, and its DOT output is replaced by the admin guide's
table, checked against this one by a test.
"""

from typing import Callable, Optional

from os_brick_cas.lifecycle.drift import Drift  # noqa: F401
from os_brick_cas.lifecycle.drift import drift  # noqa: F401
from os_brick_cas.lifecycle.drift import QUARANTINE  # noqa: F401
from os_brick_cas.lifecycle.drift import UNCHECKED  # noqa: F401
from os_brick_cas.lifecycle.host import host_state  # noqa: F401
from os_brick_cas.lifecycle.host import locate  # noqa: F401
from os_brick_cas.lifecycle.host import Located  # noqa: F401
from os_brick_cas.lifecycle.host import not_drained_reason  # noqa: F401
from os_brick_cas.lifecycle.host import state  # noqa: F401
from os_brick_cas.lifecycle.journal import journal_dir  # noqa: F401
from os_brick_cas.lifecycle.journal import read as read_record  # noqa
from os_brick_cas.lifecycle.journal import Record  # noqa: F401
from os_brick_cas.lifecycle.journal import records  # noqa: F401
from os_brick_cas.lifecycle.journal import remove as remove_record  # noqa
from os_brick_cas.lifecycle.marker import Cinder  # noqa: F401
from os_brick_cas.lifecycle.marker import owner_epoch_now  # noqa: F401
from os_brick_cas.lifecycle.states import *  # noqa: F401,F403
from os_brick_cas.lifecycle.transitions import advance  # noqa: F401
from os_brick_cas.lifecycle.transitions import deadline  # noqa: F401
from os_brick_cas.lifecycle.transitions import Deadline  # noqa: F401
from os_brick_cas.lifecycle.transitions import DrainResult  # noqa: F401
from os_brick_cas.lifecycle.transitions import Lifecycle  # noqa: F401
from os_brick_cas.lifecycle.transitions import LIVE_MIGRATION  # noqa: F401
from os_brick_cas.lifecycle.transitions import OPERATOR  # noqa: F401
from os_brick_cas.lifecycle.transitions import require  # noqa: F401
from os_brick_cas.lifecycle.transitions import SNAPSHOT  # noqa: F401
from os_brick_cas.lifecycle.transitions import SWAP  # noqa: F401
from os_brick_cas.lifecycle.transitions import Volume  # noqa: F401
from os_brick_cas.lifecycle.transitions import volume_id_of  # noqa: F401
from os_brick_cas.lifecycle.transitions import volume_of  # noqa: F401

#: test hook: called with the step name at each journaled step
step_hook: Optional[Callable[[str], None]] = None
