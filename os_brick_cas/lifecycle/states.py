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

"""The states of a cached volume on this host, and the table between them.

A *stable* state is what the host shows by itself (a listing and the
IO-class table); an *in-flight* state exists only as a journal record: a
transition that started and has not ended (its process may have died).
Each row names its sender: the path in the code that sends the event.
The admin guide's tables are checked against this one by a test
(tests/unit/os_brick_cas/test_lifecycle_table.py).
"""

import dataclasses

from os_brick_cas import exception

# -- states ------------------------------------------------------------
ABSENT = 'absent'            #: no core of the volume on this host
CACHING = 'caching'          #: active core, writes may get dirty
DRAINING = 'draining'        #: drain in flight (journaled)
DRAINED = 'drained'          #: drain class loaded, flushed: 0 dirty
UNDRAINING = 'undraining'    #: undrain in flight (journaled)
RELEASING = 'releasing'      #: core gone, marker clear pending (journaled)
INACTIVE = 'inactive'        #: core listed, not active (after a reboot)
STALE = 'stale'              #: cached data of an owner declared lost
ORPHANED = 'orphaned'        #: core whose attachment is gone

STATES = (ABSENT, CACHING, DRAINING, DRAINED, UNDRAINING, RELEASING,
          INACTIVE, STALE, ORPHANED)

#: states that exist only as a journal record: a transition in flight
IN_FLIGHT = frozenset((DRAINING, UNDRAINING, RELEASING))
#: states the host shows by itself (or a caller classifies from Cinder)
STABLE = frozenset(STATES) - IN_FLIGHT


@dataclasses.dataclass(frozen=True)
class Row:
    """One transition: the state it leads to and who sends its event."""

    target: str
    sender: str


#: (state, event) -> Row. Every caller's transition is one of these;
#: anything else is refused (TransitionRefused).
ROWS: dict[tuple[str, str], Row] = {
    (ABSENT, 'attach'): Row(CACHING, 'nova connect; connector attach'),
    (CACHING, 'attach'): Row(CACHING, 're-attach (hard reboot)'),
    (DRAINED, 'attach'): Row(DRAINED, 're-attach keeps the drain'),
    (INACTIVE, 'reactivate'): Row(CACHING, 'attach after a reboot'),
    (ABSENT, 'detach'): Row(ABSENT, 'already detached'),
    (CACHING, 'detach'): Row(ABSENT, 'nova disconnect (flushes)'),
    (DRAINED, 'detach'): Row(ABSENT, 'swap\'s old volume, migration'),
    (INACTIVE, 'detach'): Row(ABSENT, 'maps, re-activates, flushes'),
    (ABSENT, 'clear-failed'): Row(
        RELEASING, 'nova disconnect: Cinder did not take the clear'),
    (RELEASING, 'clear-failed'): Row(
        RELEASING, 'retry by attach, detach, periodic task: failed again'),
    (RELEASING, 'cleared'): Row(
        ABSENT, 'retry by attach, detach, periodic task'),
    (CACHING, 'drain'): Row(DRAINING, 'pre-check, quiesce, swap, CLI'),
    (DRAINED, 'drain'): Row(DRAINING, 'drain again (verify, tell Cinder)'),
    (DRAINING, 'drain-verified'): Row(DRAINED, 'then Cinder is told'),
    (DRAINING, 'drain-failed'): Row(
        DRAINED, 'pinned, Cinder not told; resolve of a repeated drain'),
    (DRAINED, 'undrain'): Row(
        UNDRAINING, 'rollback, unquiesce, periodic release, CLI'),
    (UNDRAINING, 'undrain-refused'): Row(
        DRAINED, 'Cinder could not be told: stays drained'),
    (UNDRAINING, 'undrain-done'): Row(CACHING, 'unpinned after Cinder'),
    (CACHING, 'undrain'): Row(CACHING, 'idempotent undrain'),
    (DRAINING, 'resolve'): Row(
        UNDRAINING, 'attach, detach, periodic task, start-up, CLI'),
    (UNDRAINING, 'resolve'): Row(
        UNDRAINING, 'attach, detach, periodic task, start-up, CLI'),
    (DRAINING, 'core-gone'): Row(
        ABSENT, 'resolve: the core was removed meanwhile'),
    (UNDRAINING, 'core-gone'): Row(
        ABSENT, 'resolve: the core was removed meanwhile'),
    (DRAINED, 'reclaim'): Row(
        DRAINED, 'failed live migration: source named again'),
    (CACHING, 'flush'): Row(CACHING, 'flush in place (nova, CLI)'),
    (DRAINED, 'flush'): Row(DRAINED, 'flush in place (nova, CLI)'),
    (ORPHANED, 'recover'): Row(ABSENT, '``os-brick-cas recover``'),
    (STALE, 'discard'): Row(ABSENT, '``os-brick-cas discard``'),
}

#: (state, event) -> state after it
TRANSITIONS: dict[tuple[str, str], str] = {
    key: row.target for key, row in ROWS.items()}


def next_state(state: str, event: str, volume: str) -> str:
    """The state *event* leads to from *state*, or TransitionRefused."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        hint = ('see "Volume life cycle" in the admin guide'
                if state not in IN_FLIGHT else
                'a stopped process left it; the next attach, detach or '
                '"os-brick-cas undrain --volume %s" resolves it, and so '
                'does nova-compute\'s periodic task' % volume)
        raise exception.TransitionRefused(
            action=event, volume=volume,
            reason='the volume is %s on this host, and %s is not a '
                   'transition from there (%s)' % (state, event, hint))
