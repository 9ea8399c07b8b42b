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

"""One time bound for a whole operation, lock waits included."""

import math
import time
from typing import Callable

from os_brick_cas import exception


class Deadline(object):
    """One time bound for a whole operation: lock waits count too.

    Passed down through every step of a multi-volume operation (a
    quiesce of N volumes, ``drain --all``, a live-migration pre-check).
    """

    def __init__(self, seconds: float,
                 clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = clock
        self.end = clock() + seconds

    def left(self) -> float:
        return max(0.0, self.end - self._clock())

    def whole_seconds(self, what: str) -> int:
        """Seconds left for *what* (a casadm timeout); raise if < 1."""
        left = math.floor(self.left())
        if left < 1:
            raise exception.CasError(
                message='%s not attempted: the overall time bound of %ss '
                        'ran out' % (what, self.seconds))
        return left
