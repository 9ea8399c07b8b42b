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


"""Progress of a flush: percent, MiB/s and ETA while the dirty count falls.

Open CAS reports a core's dirty blocks (``casadm -P``) while it flushes;
polling that is the only progress there is. On a terminal the line is
redrawn in place; otherwise (``--progress`` into a log) one line per poll.
"""

import concurrent.futures
import dataclasses
import time
from typing import Callable, Optional, TextIO

#: Open CAS counts dirty data in 4 KiB blocks
BLOCK_BYTES = 4096
MIB = 2 ** 20
#: seconds between two dirty counts
POLL_SECONDS = 1.0


@dataclasses.dataclass
class Sample:
    """The dirty count at one moment of a flush."""

    seconds: float
    dirty: int


def line(before: int, first: Sample, now: Sample) -> str:
    """``45% flushed, 12.3 MiB/s, 1500 dirty blocks left, ETA 0:00:12``."""
    done = before - now.dirty
    percent = 100.0 * done / before if before else 100.0
    elapsed = now.seconds - first.seconds
    rate = (first.dirty - now.dirty) / elapsed if elapsed > 0 else 0.0
    eta = ('ETA %s' % _clock(now.dirty / rate) if rate > 0
           else 'ETA unknown')
    return '%.0f%% flushed, %.1f MiB/s, %d dirty blocks left, %s' % (
        percent, rate * BLOCK_BYTES / MIB, now.dirty, eta)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return '%d:%02d:%02d' % (seconds // 3600, seconds // 60 % 60,
                             seconds % 60)


def watch(flush: Callable[[], None], dirty: Callable[[], int], before: int,
          prefix: str, out: TextIO, tty: bool,
          poll: float = POLL_SECONDS) -> None:
    """Run *flush* while printing progress from *dirty* every *poll* s.

    *flush*'s exception (timeout, failure) is raised here once it ends.
    """
    start = Sample(time.monotonic(), before)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(flush)
        shown: Optional[str] = None
        while True:
            try:
                running.result(timeout=poll)
                break
            except concurrent.futures.TimeoutError:
                pass
            now = Sample(time.monotonic(), dirty())
            shown = '%s: %s' % (prefix, line(before, start, now))
            print(('\r%s\033[K' % shown) if tty else shown, end='' if tty
                  else '\n', file=out, flush=True)
        if shown is not None and tty:
            print(file=out)
