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

"""An instance's IO-class table: the one place that composes it.

casadm replaces the whole table on every load, so every change (a drain,
an undrain, a shared volume's attach or detach) composes the whole table
with :func:`compose` from what each core should have, an :class:`Entry`:

* a *share* (``cas:cache_share``): class ``core_id:eq:N&done`` with
  allocation = the share and an empty (pinned) eviction priority, so other
  classes never evict its lines while it is within its cap;
* *drained* (:mod:`os_brick_cas.drain`): the same rule at allocation 0.
  Drain wins over a share; the drained class keeps the share in its
  eviction priority (meaningless for a class that never maps a line), so
  undrain restores it from the table alone, also after a reboot (the
  table persists in cache metadata).

Class 0 (``unclassified``: every core without a class) gets what the
shares leave, so the caps of all classes sum to at most 100% and no
class can grow into another's share (Open CAS's hard isolation).

The budget: ids 1..32. A drain always gets a class; shares get theirs
oldest first (the order of the entries, i.e. of the classes in the
table, a new entry last) while ids and percent remain, and a share that
does not fit gets none (the core is then in class 0, uncapped): the
newest shares lose theirs first. :attr:`Composed.unshared` names them.
"""

import contextlib
import dataclasses
import re
from typing import Iterable, Iterator, Optional, Sequence

from oslo_log import log as logging

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas import labels
from os_brick_cas import locks
from os_brick_cas.opencas import casadm_output
from os_brick_cas import validation

LOG = logging.getLogger(__name__)

UNCLASSIFIED = 'unclassified'
#: class 0's eviction priority (Open CAS's default)
UNCLASSIFIED_PRIORITY = 255
#: class ids 1..32 are ours to hand out (0 is unclassified)
IDS = range(1, 33)
_CORE_RULE = re.compile(r'core_id:eq:(?P<core>\d+)&done')


def core_rule(core_id: int) -> str:
    """The IO-class rule that matches core *core_id*'s requests."""
    return 'core_id:eq:%d&done' % core_id


@dataclasses.dataclass(frozen=True)
class Entry:
    """What one core should have in its instance's table."""

    core_id: int
    #: whole percent of the instance (1..100), or None
    share: Optional[int] = None
    drained: bool = False


@dataclasses.dataclass(frozen=True)
class Composed:
    """A whole table, and the shares that got no class in it."""

    table: list[casadm_output.IoClass]
    #: cores whose share did not fit the budget, newest first
    unshared: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class ShareStatus:
    """A volume's cache share: asked for (its type) and had (the table)."""

    asked: Optional[int]
    has: Optional[int]

    @property
    def honoured(self) -> bool:
        return self.asked == self.has


def _percent(allocation: float) -> int:
    return int(round(allocation * 100))


def entries(table: Iterable[casadm_output.IoClass]) -> list[Entry]:
    """What a table gives each core, in class-id order (oldest first).

    Rules other than ``core_id:eq:N&done`` are not ours and are left out
    (the next load drops them).
    """
    found = []
    for io_class in sorted(table, key=lambda c: c.class_id):
        match = _CORE_RULE.fullmatch(io_class.name)
        if not match or io_class.class_id == 0:
            continue
        core_id = int(match.group('core'))
        if io_class.allocation == 0:
            remembered = io_class.priority
            share = remembered if remembered and remembered <= 100 else None
            found.append(Entry(core_id, share, True))
        else:
            found.append(Entry(core_id, _percent(io_class.allocation)))
    return found


def compose(wanted: Sequence[Entry]) -> Composed:
    """The whole table for *wanted* (oldest first; one entry per core).

    Raises ValueError for more drained cores than class ids (a drain
    refuses before that: :func:`os_brick_cas.drain.budget_reason`).
    """
    drained = [entry for entry in wanted if entry.drained]
    if len(drained) > len(IDS):
        raise ValueError('more drained cores than IO class ids')
    free_ids = len(IDS) - len(drained)
    left = 100
    granted = []
    unshared = []
    for entry in wanted:
        if entry.drained:
            granted.append(entry)
        elif entry.share is not None:
            if free_ids and entry.share <= left:
                granted.append(entry)
                free_ids -= 1
                left -= entry.share
            else:
                unshared.append(entry.core_id)
    table = [casadm_output.IoClass(0, UNCLASSIFIED, UNCLASSIFIED_PRIORITY,
                                   left / 100)]
    for class_id, entry in zip(IDS, granted):
        table.append(_io_class(class_id, entry))
    return Composed(table, tuple(reversed(unshared)))


def _io_class(class_id: int, entry: Entry) -> casadm_output.IoClass:
    rule = core_rule(entry.core_id)
    if entry.drained:
        # never maps a line: its priority only remembers the share
        return casadm_output.IoClass(class_id, rule, entry.share or 0, 0.0)
    # pinned: evicted only when over its own cap
    return casadm_output.IoClass(class_id, rule, None, entry.share / 100)


def with_entry(current: Sequence[Entry], core_id: int,
               share: Optional[int] = None,
               drained: Optional[bool] = None,
               existing: Optional[Iterable[int]] = None) -> list[Entry]:
    """*current* with core *core_id*'s entry changed.

    *share* and *drained* replace what the entry had (``drained`` None:
    kept as it is, False for a core without an entry); the core keeps its
    place, or a new one goes last. An entry with neither a share nor a
    drain is dropped. With *existing*, entries of other cores not in it
    (removed cores) are dropped too.
    """
    alive = None if existing is None else set(existing)
    out = []
    found = None
    for entry in current:
        if entry.core_id == core_id:
            found = entry
            out.append(None)
        elif alive is None or entry.core_id in alive:
            out.append(entry)
    if drained is None:
        drained = bool(found and found.drained)
    new = Entry(core_id, share, drained)
    keep = new.drained or new.share is not None
    if found is None:
        out.append(new if keep else None)
    else:
        out = [(new if keep else None) if entry is None else entry
               for entry in out]
    return [entry for entry in out if entry is not None]


def without_core(current: Sequence[Entry], core_id: int) -> list[Entry]:
    """*current* without core *core_id*'s entry."""
    return [entry for entry in current if entry.core_id != core_id]


def share_of(table: Iterable[casadm_output.IoClass], core_id: int
             ) -> Optional[int]:
    """The share core *core_id* has in *table* now (None if none).

    A drained core's share is remembered, but it has none while drained.
    """
    for entry in entries(table):
        if entry.core_id == core_id and not entry.drained:
            return entry.share
    return None


def is_composed(table: list[casadm_output.IoClass]) -> bool:
    """Whether *table* is one :func:`compose` makes (not loaded by hand)."""
    wanted = entries(table)
    if len(wanted) > len(IDS) or len({e.core_id for e in wanted}) != len(
            wanted):
        return False
    return compose(wanted).table == table


def is_default(table: Sequence[casadm_output.IoClass]) -> bool:
    """Whether *table* is the one of an instance without classes."""
    return list(table) == compose([]).table


def recomposed(table: Sequence[casadm_output.IoClass], existing: Iterable[int]
               ) -> Optional[Composed]:
    """*table* composed again for cores *existing*; None if unchanged.

    After a reboot the table is whatever the cache metadata held (possibly
    older than the last change, or loaded by hand): classes of cores that
    are gone, rules that are not ours and a class 0 that does not get what
    the shares leave are all dropped. Each remaining core keeps what the
    table gives it until its own attach puts its share in place.
    """
    composed = compose(_live_entries(table, existing))
    return None if composed.table == list(table) else composed


def _live_entries(table: Sequence[casadm_output.IoClass],
                  existing: Iterable[int]) -> list[Entry]:
    """*table*'s entries of cores in *existing*, the first one per core."""
    alive = set(existing)
    seen: set[int] = set()
    live = []
    for entry in entries(table):
        if entry.core_id in alive and entry.core_id not in seen:
            seen.add(entry.core_id)
            live.append(entry)
    return live


def expected(table: Sequence[casadm_output.IoClass], asked: dict[int, int],
             existing: Iterable[int]) -> Composed:
    """The table the attached volumes' shares and drains should give.

    *table* is the loaded one (its order and drains stand), *asked* the
    share each core's volume asked for (its record), *existing* the
    instance's core ids. A share class gets the asked share; a core that
    asked but has no class comes after the classes (in core-id order);
    classes of cores that are gone are dropped; a share class without a
    record is kept as it is (nothing says it is wrong).
    """
    alive = set(existing)
    wanted = [dataclasses.replace(entry, share=asked.get(entry.core_id,
                                                         entry.share))
              for entry in _live_entries(table, alive)]
    placed = {entry.core_id for entry in wanted}
    wanted += [Entry(core_id, asked[core_id]) for core_id in sorted(asked)
               if core_id in alive and core_id not in placed]
    return compose(wanted)


def warn_unshared(cache_id: int, composed: Composed) -> None:
    """Log, at WARNING, each share the budget left without a class."""
    for core_id in composed.unshared:
        LOG.warning('%(core)s gets no IO class for its cache share: cache '
                    'instance %(cache)d has no class id or percent left '
                    '(32 classes; the shares sum to at most 100%%). It is '
                    'cached uncapped in class 0 until a class is freed and '
                    'the volume is attached again.',
                    {'core': labels.core(cache_id, core_id),
                     'cache': cache_id})


def table_lock(cache_id: int, timeout: Optional[float] = None):
    """Serialise read-modify-write of one instance's IO-class table.

    Held only around ``-C -L`` + ``-C -C``, never across a flush, so an
    attach (which must drop an inherited class) never waits behind another
    volume's flush the way it would on the instance lock. Order: instance
    lock (if any) first, then this one.
    """
    return locks._lock('ioclass-%d' % cache_id,
                       'the IO-class table of cache instance %d' % cache_id,
                       timeout)


@dataclasses.dataclass(frozen=True)
class Reservation:
    """A new core's id (None: casadm picks); is its class in the table?

    *share*: what the core has in the table loaded for it (when in place).
    """

    core_id: Optional[int]
    in_place: bool
    share: Optional[int] = None


class Keeper(object):
    """Puts one core's share into its instance's table (attach, detach).

    Every change is a read-modify-write of the whole table under
    :func:`table_lock`, the lock the drain takes for its changes.
    """

    def __init__(self, casadm: casadm_mod.Casadm):
        self.casadm = casadm

    def place(self, cache_id: int, core_id: int, share: Optional[int],
              new_core: bool) -> Optional[int]:
        """Give core *core_id* its *share* (None: no class); its share now.

        *new_core*: casadm just added it, so a class naming its id is an
        earlier core's (dropped; a new core is never drained). Otherwise
        (re-attach, a core the loader re-activated) a drain stays and only
        remembers *share* for the undrain. Returns the share the core has
        in the loaded table (None if drained, unshared or none asked).

        The whole table is composed again unless it is the default one,
        also for a volume without a share: after a reboot it is whatever
        the cache metadata held (:func:`recomposed`), so the first attach
        drops classes of cores that are gone and rules that are not ours.
        """
        with table_lock(cache_id):
            current = self.casadm.list_io_classes(cache_id)
            before = entries(current)
            mine = [entry for entry in before if entry.core_id == core_id]
            if not mine and share is None and is_default(current):
                return None
            if new_core and mine:
                LOG.warning('Dropped the IO class (%s) an earlier core left '
                            'for %s, just added with its id.',
                            'drain' if mine[0].drained else 'share',
                            labels.core(cache_id, core_id))
                before = without_core(before, core_id)
            composed = self._load(cache_id, current, with_entry(
                before, core_id, share, None, self._existing(cache_id)))
            warn_unshared(cache_id, composed)
            return share_of(composed.table, core_id)

    def _load(self, cache_id: int, current: list[casadm_output.IoClass],
              wanted: Sequence[Entry]) -> Composed:
        """Compose *wanted*; load it unless *current* is that table."""
        composed = compose(wanted)
        if composed.table != current:
            self.casadm.load_io_classes(cache_id, composed.table)
        return composed

    @contextlib.contextmanager
    def new_core(self, cache_id: int, share: Optional[int]
                 ) -> Iterator['Reservation']:
        """Hold *cache_id*'s table while a new core is added to it.

        With a *share*: a free core id whose class is in the loaded table
        before the core exists (and without a class a removed core left
        with that id); the caller adds the core with that id
        (``--core-id``) inside the block. None of its IO, udev's first
        probe reads included, then lands in class 0, whose lines OCF
        moves into the core's class on a hit without checking the cap
        (its repartition): the overshoot the kernel tier measured. If
        the block fails, the class is taken out again. A table that
        cannot be loaded is logged; the attach goes on (a share is a cap,
        not data safety) and :meth:`place` tries again after the add.

        Without a share casadm picks the id (:attr:`Reservation.core_id`
        is None) and :meth:`place` drops a class an earlier core left.
        Either way the add runs under the table's lock, so it never takes
        an id another attach has just given a class.
        """
        with table_lock(cache_id):
            if share is None:
                yield Reservation(None, False)
                return
            existing = self._existing(cache_id)
            core_id = next((candidate for candidate in
                            range(1, validation.MAX_CORE_ID + 1)
                            if candidate not in existing), None)
            if core_id is None:
                raise exception.CasError(
                    'cache instance %d has no free core id (every one of '
                    '1..%d is used)' % (cache_id, validation.MAX_CORE_ID))
            current = self.casadm.list_io_classes(cache_id)
            before = entries(current)
            left = [entry for entry in before if entry.core_id == core_id]
            if left:
                LOG.warning('Dropped the IO class (%s) an earlier core left '
                            'for %s, about to be added with its id.',
                            'drain' if left[0].drained else 'share',
                            labels.core(cache_id, core_id))
                before = without_core(before, core_id)
            try:
                composed = self._load(cache_id, current, with_entry(
                    before, core_id, share, False, existing | {core_id}))
            except exception.CasError as exc:
                LOG.warning('Could not load the IO classes of %(core)s '
                            'before adding it (%(err)s); trying again '
                            'after the add.',
                            {'err': exc,
                             'core': labels.core(cache_id, core_id)})
                reservation = Reservation(core_id, False)
            else:
                warn_unshared(cache_id, composed)
                reservation = Reservation(
                    core_id, True, share_of(composed.table, core_id))
            in_place = reservation.in_place
            try:
                yield reservation
            except BaseException:
                if in_place:
                    self._drop_reserved(cache_id, core_id)
                raise

    def _drop_reserved(self, cache_id: int, core_id: int) -> None:
        """Take the class of a core that was not added out of the table."""
        try:
            current = self.casadm.list_io_classes(cache_id)
            self._load(cache_id, current,
                       without_core(entries(current), core_id))
        except exception.CasError as exc:
            LOG.warning('Could not take the class of %(core)s, which was not '
                        'added, out of the IO-class table (%(err)s); the '
                        'next attach to instance %(cache)d drops it.',
                        {'err': exc, 'cache': cache_id,
                         'core': labels.core(cache_id, core_id)})

    def _existing(self, cache_id: int) -> set[int]:
        """Core ids of instance *cache_id* as casadm lists them now."""
        return {core.core_id for cache in self.casadm.list_caches()
                if cache.cache_id == cache_id for core in cache.cores}

    def share_now(self, cache_id: int, core_id: int) -> Optional[int]:
        """The share core *core_id* has in its instance's table now."""
        return share_of(self.casadm.list_io_classes(cache_id), core_id)
