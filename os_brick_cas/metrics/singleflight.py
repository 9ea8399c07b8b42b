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

"""One computation at a time, shared by its concurrent callers and reused.

Prometheus (or several of them, or an impatient operator with curl) may
scrape in parallel; each collection calls casadm as root. A
:class:`SingleFlight` runs at most one collection at a time: callers that
arrive meanwhile wait for it and share its result, and a result younger
than ``max_age`` seconds is returned without collecting again.
"""

import threading
import time
from typing import Callable, Generic, Optional, TypeVar

T = TypeVar('T')


class SingleFlight(Generic[T]):
    """Run *compute* for one caller at a time; share and reuse its result.

    *max_age* is read at every call (an oslo.config option may change).
    *compute* must not raise: its result is what every waiter gets.
    """

    def __init__(self, compute: Callable[[], T],
                 max_age: Callable[[], float]) -> None:
        self._compute = compute
        self._max_age = max_age
        self._lock = threading.Lock()
        self._result: Optional[T] = None
        self._done_at = 0.0

    def get(self) -> T:
        """The latest result, computed now unless it is fresh enough."""
        with self._lock:
            if (self._result is None or
                    time.monotonic() - self._done_at >= self._max_age()):
                self._result = self._compute()
                self._done_at = time.monotonic()
            return self._result
