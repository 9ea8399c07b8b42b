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

"""SingleFlight: one computation at a time, shared and reused."""

import threading
import time

import testtools

from os_brick_cas.metrics import singleflight


class SingleFlightTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        self.lock = threading.Lock()
        self.running = self.most = self.calls = 0

    def compute(self) -> int:
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return self.calls

    def callers(self, flight: singleflight.SingleFlight, count: int) -> list:
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            flight.get())) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        return results

    def test_concurrent_callers_share_one_computation(self):
        flight = singleflight.SingleFlight(self.compute, lambda: 60)
        self.assertEqual([1] * 20, self.callers(flight, 20))
        self.assertEqual((1, 1), (self.calls, self.most))

    def test_without_reuse_computations_still_run_one_at_a_time(self):
        flight = singleflight.SingleFlight(self.compute, lambda: 0)
        self.assertEqual(list(range(1, 6)), sorted(self.callers(flight, 5)))
        self.assertEqual(1, self.most)

    def test_a_result_is_reused_only_while_fresh(self):
        max_age = [60.0]
        flight = singleflight.SingleFlight(self.compute, lambda: max_age[0])
        self.assertEqual((1, 1), (flight.get(), flight.get()))
        max_age[0] = 0.1
        time.sleep(0.15)
        self.assertEqual(2, flight.get())
