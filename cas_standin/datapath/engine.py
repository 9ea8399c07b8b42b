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

"""A userspace cache engine with Open CAS line semantics.

Bytes really sit in a cache file (the stand-in's "SSD") until they are
cleaned to the core, so a skipped flush loses or hides data and a test can
see it. Metadata (line map, dirty bits, IO classes, mode) lives in a sidecar
JSON snapshot stamped with the cache file's identity, plus a journal of
line-map changes appended (and synced) after each write, so a write costs
one small append instead of a snapshot. A destroyed or replaced cache file
is detected on load and reported as :class:`CacheDeviceLost` with the
number of dirty lines lost.
"""

import collections
import json
import math
import os
from typing import Optional
import uuid

LINE = 4096
MODES = ('wt', 'wb', 'wa', 'wo', 'pt')
MAX_IO_CLASSES = 33
_MAGIC = b'OSBRICKCAS-STANDIN\n'


class CacheDeviceLost(Exception):
    """The cache file is gone or replaced: its dirty lines are lost."""

    def __init__(self, path: str, dirty_lines: int):
        self.path = path
        self.dirty_lines = dirty_lines
        super().__init__(
            'Cache device %s is lost: %d dirty line(s) never reached the '
            'core; restore from backup' % (path, dirty_lines))


class CoreInactive(Exception):
    """I/O or cleaning for a core whose device is not attached."""


class IoClass(collections.namedtuple(
        'IoClass', 'id name priority allocation')):
    """One IO-class row; ``name`` is the rule (``core_id:eq:N[&done]``).

    ``priority`` is 0-255 or None (pinned); ``allocation`` 0-1.
    """

    def matches(self, core_id: int) -> tuple:
        """Return (matches, done) for a request of ``core_id``."""
        if self.name == 'unclassified':
            return True, False
        done = False
        match = True
        for term in self.name.split('&'):
            if term == 'done':
                done = True
            elif term.startswith('core_id:eq:'):
                match = match and int(term.split(':')[2]) == core_id
            else:
                raise ValueError('unsupported IO class rule %r' % term)
        return match, done


DEFAULT_CLASSES = (IoClass(0, 'unclassified', 255, 1.0),)


class Stats(object):
    """Request counters, as casadm -P reports them."""

    FIELDS = ('read_hits', 'read_partial_misses', 'read_full_misses',
              'write_hits', 'write_partial_misses', 'write_full_misses',
              'pass_through_reads', 'pass_through_writes')

    def __init__(self):
        for field in self.FIELDS:
            setattr(self, field, 0)

    @property
    def write_misses(self) -> int:
        return self.write_partial_misses + self.write_full_misses

    def as_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.FIELDS}


class CacheEngine(object):
    """One cache instance: ``lines`` 4 KiB slots in ``cache_path``."""

    def __init__(self, cache_path: str, lines: int, mode: str = 'wt'):
        if mode not in MODES:
            raise ValueError('cache mode must be one of %s' % (MODES,))
        self.cache_path = cache_path
        self.meta_path = cache_path + '.meta'
        self.lines = lines
        self.mode = mode
        self.io_classes = list(DEFAULT_CLASSES)
        # (core_id, core_line) -> [slot, dirty, io_class]; order = LRU
        self.map = collections.OrderedDict()
        self.cores = {}        # core_id -> fd of the core device
        self.stats = Stats()   # whole instance; per core in core_stats
        self.core_stats = collections.defaultdict(Stats)
        self.identity = None
        self.generation = 0
        self._fd = None
        self._journal = None
        self._journal_rows = 0
        self._changed = set()
        self._reused = False

    # -- lifecycle -------------------------------------------------------
    def create(self) -> None:
        """Format the cache file (start without --load)."""
        self.identity = uuid.uuid4().hex
        with open(self.cache_path, 'wb') as f:
            f.write(_MAGIC + self.identity.encode() + b'\n')
            f.truncate(LINE * (self.lines + 1))
        self._open()
        self.save()

    @classmethod
    def load(cls, cache_path: str) -> 'CacheEngine':
        """Load after a (simulated) reboot; cores come back Inactive."""
        meta = cls.read_meta(cache_path)
        engine = cls(cache_path, meta['lines'], meta['mode'])
        engine.identity = meta['identity']
        engine.generation = meta['generation']
        engine.io_classes = [IoClass(*c) for c in meta['io_classes']]
        for core_id, core_line, slot, dirty, klass in meta['map']:
            engine.map[(core_id, core_line)] = [slot, dirty, klass]
        engine.verify()
        engine._open()
        return engine

    @staticmethod
    def read_meta(cache_path: str) -> dict:
        """The metadata as last committed: snapshot + its journal."""
        with open(cache_path + '.meta') as f:
            meta = json.load(f)
        meta.setdefault('generation', 0)
        lines = collections.OrderedDict(
            ((c, n), [s, d, k]) for c, n, s, d, k in meta['map'])
        try:
            with open(cache_path + '.journal') as journal:
                rows = journal.read().split('\n')
        except FileNotFoundError:
            rows = []
        # a journal of another generation predates the snapshot; the last
        # row may be torn by a crash (it was never acknowledged)
        if rows and rows[0] == json.dumps({'generation': meta['generation']}):
            for row in rows[1:]:
                try:
                    change = json.loads(row)
                except ValueError:
                    break
                if len(change) == 2:
                    lines.pop(tuple(change), None)
                else:
                    lines[tuple(change[:2])] = change[2:]
        meta['map'] = [[c, n, s, d, k] for (c, n), (s, d, k) in lines.items()]
        return meta

    def verify(self) -> None:
        """Raise CacheDeviceLost unless the cache file is this cache's."""
        cache_path = self.cache_path
        try:
            with open(cache_path, 'rb') as f:
                head = f.read(len(_MAGIC) + 33)
        except FileNotFoundError:
            head = b''
        if head != _MAGIC + self.identity.encode() + b'\n':
            raise CacheDeviceLost(cache_path, self.dirty_lines())

    def _open(self) -> None:
        self._fd = os.open(self.cache_path, os.O_RDWR)

    def save(self) -> None:
        """Persist a metadata snapshot atomically; start a new journal."""
        self.generation += 1
        meta = {'identity': self.identity, 'lines': self.lines,
                'mode': self.mode, 'io_classes': self.io_classes,
                'generation': self.generation,
                'map': [[c, n, s, d, k]
                        for (c, n), (s, d, k) in self.map.items()]}
        tmp = self.meta_path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(meta, f)
            f.flush()
            os.fsync(f.fileno())
        os.fsync(self._fd)
        os.replace(tmp, self.meta_path)
        if self._journal is not None:
            os.close(self._journal)
        self._journal = os.open(self.cache_path + '.journal',
                                os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                                os.O_APPEND, 0o600)
        os.write(self._journal, json.dumps(
            {'generation': self.generation}).encode())
        os.fsync(self._journal)
        self._journal_rows = 0
        self._changed.clear()

    def commit(self) -> None:
        """Make the line-map changes durable (after their data)."""
        if not self._changed:
            return
        if self._journal is None or self._journal_rows > 4 * self.lines:
            self.save()
            return
        rows = []
        for key in self._changed:
            entry = self.map.get(key)
            rows.append(list(key) + entry if entry is not None
                        else list(key))
        os.fsync(self._fd)
        os.write(self._journal, b''.join(
            b'\n' + json.dumps(row).encode() for row in rows))
        os.fsync(self._journal)
        self._journal_rows += len(rows)
        self._changed.clear()

    def close(self) -> None:
        """Stop without flushing (dirty lines stay in the cache file)."""
        for fd in self.cores.values():
            os.close(fd)
        self.cores.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._journal is not None:
            os.close(self._journal)
            self._journal = None

    def attach_core(self, core_id: int, core_path: str) -> None:
        """Add or try-add a core; its kept lines become reachable again."""
        if core_id in self.cores:
            raise ValueError('core %d is already attached' % core_id)
        self.cores[core_id] = os.open(core_path, os.O_RDWR | os.O_DSYNC)

    def detach_core(self, core_id: int) -> None:
        """Close the core without cleaning: it turns Inactive, lines kept."""
        os.close(self.cores.pop(core_id))
        self.save()

    def drop_core(self, core_id: int) -> int:
        """Discard every line of the core (forced removal); dirty dropped."""
        dirty = self.dirty_lines(core_id)
        for key in [k for k in self.map if k[0] == core_id]:
            del self.map[key]
        fd = self.cores.pop(core_id, None)
        if fd is not None:
            os.close(fd)
        self.save()
        return dirty

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError('cache mode must be one of %s' % (MODES,))
        self.mode = mode
        self.save()

    def remove_core(self, core_id: int) -> None:
        """Clean the core's dirty lines, drop its lines, close it."""
        self.flush(core_id)
        if self.dirty_lines(core_id):
            raise RuntimeError('core %d still has dirty lines after the '
                               'flush; not removing it' % core_id)
        for key in [k for k in self.map if k[0] == core_id]:
            del self.map[key]
        os.close(self.cores.pop(core_id))
        self.save()

    # -- counters ---------------------------------------------------------
    def _count(self, core_id: int, field: str) -> None:
        setattr(self.stats, field, getattr(self.stats, field) + 1)
        per_core = self.core_stats[core_id]
        setattr(per_core, field, getattr(per_core, field) + 1)

    def occupancy(self, core_id: int = None) -> int:
        return sum(1 for k in self.map if core_id in (None, k[0]))

    def dirty_lines(self, core_id: int = None) -> int:
        return sum(1 for k, v in self.map.items()
                   if v[1] and core_id in (None, k[0]))

    # -- IO classes -------------------------------------------------------
    def load_io_classes(self, classes: list) -> None:
        """Replace the whole table (casadm -C -C)."""
        ids = [c.id for c in classes]
        if len(classes) > MAX_IO_CLASSES or any(
                i < 0 or i >= MAX_IO_CLASSES for i in ids):
            raise ValueError('at most %d IO classes, ids 0-%d'
                             % (MAX_IO_CLASSES, MAX_IO_CLASSES - 1))
        if len(set(ids)) != len(ids):
            raise ValueError('duplicate IO class id')
        zero = [c for c in classes if c.id == 0]
        if not zero or zero[0].name != 'unclassified':
            raise ValueError('IO class 0 must be "unclassified"')
        for c in classes:
            if not 0 <= c.allocation <= 1:
                raise ValueError('allocation must be within 0-1')
            c.matches(0)
        self.io_classes = sorted(classes, key=lambda c: c.id)
        self.save()

    def classify(self, core_id: int) -> IoClass:
        """Rules in class-id order; the last match wins unless &done."""
        chosen = self.io_classes[0]
        for klass in self.io_classes:
            match, done = klass.matches(core_id)
            if match:
                chosen = klass
                if done:
                    break
        return chosen

    # -- data path --------------------------------------------------------
    def _core_fd(self, core_id: int) -> int:
        try:
            return self.cores[core_id]
        except KeyError:
            raise CoreInactive('core %d is inactive' % core_id)

    def _read_slot(self, slot: int) -> bytes:
        return os.pread(self._fd, LINE, LINE * (slot + 1))

    def _write_slot(self, slot: int, data: bytes) -> None:
        os.pwrite(self._fd, data, LINE * (slot + 1))

    def _read_core_line(self, core_id: int, line: int) -> bytes:
        data = os.pread(self._core_fd(core_id), LINE, line * LINE)
        return data.ljust(LINE, b'\0')

    def _clean(self, key: tuple) -> None:
        entry = self.map[key]
        if entry[1]:
            data = self._read_slot(entry[0])
            os.pwrite(self._core_fd(key[0]), data, key[1] * LINE)
            entry[1] = False
            self._changed.add(key)

    def class_cap(self, klass: IoClass) -> int:
        """Lines the class may hold: ceil(share x cache lines)."""
        return max(1, math.ceil(round(klass.allocation * 100) *
                                self.lines / 100))

    def _capped(self) -> bool:
        """Whether a class that maps lines has a cap below the cache."""
        return any(0 < c.allocation and self.class_cap(c) < self.lines
                   for c in self.io_classes)

    def _class_by_id(self, class_id: int) -> Optional[IoClass]:
        return next((c for c in self.io_classes if c.id == class_id), None)

    def _evictable(self, class_id: int, requester: IoClass,
                   counts: collections.Counter) -> bool:
        """Whether a miss of *requester* may take a line of *class_id*."""
        other = self._class_by_id(class_id)
        if other is None or counts[class_id] > self.class_cap(other):
            return True
        if other.priority is None:
            return False        # pinned: only over its cap
        return requester.priority is None or \
            other.priority >= requester.priority

    def _victim(self, klass: IoClass) -> Optional[tuple]:
        """The line a miss of *klass* takes: () a free one, None no room.

        With caps (a class that maps lines has less than the whole
        cache), ocf_space.c and ocf_lru.c: a class at its cap evicts only
        its own clean lines (LRU first); under its cap, in a full cache,
        it takes clean lines of classes over their cap, then of classes
        whose priority value is at least its own; a pinned class is
        evicted only over its cap; dirty lines are never evicted. Without
        caps the older model stays: the LRU line, cleaned first.
        """
        counts = collections.Counter(v[2] for v in self.map.values())
        at_cap = counts[klass.id] >= self.class_cap(klass)
        if not self._capped():
            if not at_cap and len(self.map) < self.lines:
                return ()
            return next(iter(self.map), None)
        if at_cap:
            return next((k for k, v in self.map.items()
                         if v[2] == klass.id and not v[1]), None)
        if len(self.map) < self.lines:
            return ()
        clean = [(k, v[2]) for k, v in self.map.items() if not v[1]]
        over = next((k for k, class_id in clean
                     if self._class_by_id(class_id) is None or
                     counts[class_id] > self.class_cap(
                         self._class_by_id(class_id))), None)
        if over is not None:
            return over
        return next((k for k, class_id in clean
                     if self._evictable(class_id, klass, counts)), None)

    def _free_slot(self, klass: IoClass) -> Optional[int]:
        """A slot for a new line of *klass*, or None (no room: bypass)."""
        victim = self._victim(klass)
        if victim is None:
            return None
        if victim:
            self._reused = True
            self._clean(victim)
            os.fsync(self._core_fd(victim[0]))
            self._changed.add(victim)
            slot = self.map.pop(victim)[0]
            # the victim's removal is durable before its slot is rewritten
            self.commit()
            return slot
        used = {v[0] for v in self.map.values()}
        return min(set(range(self.lines)) - used)

    def _insert(self, key: tuple, data: bytes, dirty: bool,
                klass: IoClass) -> bool:
        """Map *key* in *klass*; False when the class has no room."""
        slot = self._free_slot(klass)
        if slot is None:
            return False
        self._write_slot(slot, data)
        self.map[key] = [slot, dirty, klass.id]
        self._changed.add(key)
        return True

    def read(self, core_id: int, offset: int, length: int) -> bytes:
        """Read through the cache, promoting misses as the mode says."""
        klass = self.classify(core_id)
        first, last = offset // LINE, (offset + length - 1) // LINE
        keys = [(core_id, n) for n in range(first, last + 1)]
        hits = sum(1 for k in keys if k in self.map)
        bypass = self.mode == 'pt' or klass.allocation == 0
        out = []
        self._reused = False
        # no room in the class (at its cap, only dirty lines of its own):
        # the rest of the request passes through, counted as such
        no_room = False
        for key in keys:
            if key in self.map:
                if bypass:
                    self._reused = True
                    self._clean(key)
                    del self.map[key]
                    self._changed.add(key)
                    out.append(self._read_core_line(*key))
                    continue
                self.map.move_to_end(key)
                out.append(self._read_slot(self.map[key][0]))
                continue
            data = self._read_core_line(*key)
            if not bypass and not no_room and self.mode != 'wo':
                no_room = not self._insert(key, data, False, klass)
            out.append(data)
        if bypass or no_room:
            self._count(core_id, 'pass_through_reads')
        elif hits == len(keys):
            self._count(core_id, 'read_hits')
        elif hits:
            self._count(core_id, 'read_partial_misses')
        else:
            self._count(core_id, 'read_full_misses')
        if self._reused:
            # lines left the map: commit before their slots are reused
            self.commit()
        # otherwise a read added only clean lines and LRU order, which a
        # crash may lose safely; the next write, flush or stop saves them
        skip = offset - first * LINE
        return b''.join(out)[skip:skip + length]

    def write(self, core_id: int, offset: int, data: bytes) -> None:
        """Write through the cache following the mode and the IO class."""
        klass = self.classify(core_id)
        bypass = self.mode == 'pt' or klass.allocation == 0
        end = offset + len(data)
        first, last = offset // LINE, (end - 1) // LINE
        keys = [(core_id, n) for n in range(first, last + 1)]
        hits = sum(1 for k in keys if k in self.map)
        no_room = False
        core = self._core_fd(core_id)
        for key in keys:
            base = key[1] * LINE
            lo, hi = max(offset, base), min(end, base + LINE)
            piece = data[lo - offset:hi - offset]
            hit = key in self.map
            if bypass:
                # overlapping dirty lines are cleaned first, then invalidated
                if hit:
                    self._clean(key)
                    del self.map[key]
                    self._changed.add(key)
                os.pwrite(core, piece, lo)
                continue
            if hi - lo == LINE:
                line = bytearray(LINE)
            elif hit:
                line = bytearray(self._read_slot(self.map[key][0]))
            else:
                line = bytearray(self._read_core_line(*key))
            line[lo - base:hi - base] = piece
            if self.mode in ('wb', 'wo'):
                if hit:
                    self._write_slot(self.map[key][0], bytes(line))
                    self.map[key][1] = True
                    self._changed.add(key)
                    self.map.move_to_end(key)
                elif no_room or not self._insert(key, bytes(line), True,
                                                 klass):
                    # no room in the class: write-invalidate (the line is
                    # not mapped, so the write goes straight to the core)
                    no_room = True
                    os.pwrite(core, piece, lo)
                continue
            os.pwrite(core, piece, lo)
            if hit:
                self._write_slot(self.map[key][0], bytes(line))
                self.map.move_to_end(key)
            elif self.mode == 'wt' and not no_room:
                no_room = not self._insert(key, bytes(line), False, klass)
        if bypass or no_room:
            self._count(core_id, 'pass_through_writes')
        elif hits == len(keys):
            self._count(core_id, 'write_hits')
        elif hits:
            self._count(core_id, 'write_partial_misses')
        else:
            self._count(core_id, 'write_full_misses')
        self.commit()

    def flush(self, core_id: int = None) -> int:
        """Clean every dirty line (of one core); returns lines cleaned."""
        keys = [k for k, v in self.map.items()
                if v[1] and core_id in (None, k[0])]
        for key in keys:
            self._clean(key)
        for cid in {k[0] for k in keys}:
            os.fsync(self._core_fd(cid))
        self.commit()
        return len(keys)
