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

"""Concurrent attach/detach on one host: per-volume and per-instance locks."""

from concurrent import futures
import random

from tests.functional import base


class ConcurrencyTestCase(base.FunctionalTestCase):

    def run_all(self, calls, workers: int = 8) -> list:
        with futures.ThreadPoolExecutor(workers) as pool:
            return [job.result() for job in
                    [pool.submit(func, *args) for func, *args in calls]]

    def test_different_volumes_in_parallel(self):
        images = [self.image('volume-par-%02d' % i, 4) for i in range(16)]
        modes = ['wt', 'wb']
        props = [self.props(image, modes[i % 2])
                 for i, image in enumerate(images)]
        infos = self.run_all([(self.connector.connect_volume, p)
                              for p in props])
        paths = [info['path'] for info in infos]
        self.assertEqual(16, len(set(paths)))
        cores = self.cores()
        self.assertEqual(16, len(cores))
        self.assertEqual({1: 8, 2: 8}, {
            cache_id: sum(1 for c in cores if c.cache_id == cache_id)
            for cache_id in (1, 2)})
        self.assertEqual(16, len(self.mappings()))
        self.run_all([(self.connector.disconnect_volume, p, i)
                      for p, i in zip(props, infos)])
        self.assert_clean_host()

    def test_same_volume_attached_concurrently(self):
        image = self.image('volume-same')
        props = self.props(image, 'wb')
        infos = self.run_all([(self.connector.connect_volume, props)] * 6)
        self.assertEqual(1, len({info['path'] for info in infos}))
        self.assertEqual(1, len(self.cores()))
        self.assertEqual(1, len(self.mappings()))
        self.run_all([(self.connector.disconnect_volume, props, infos[0])]
                     * 6)
        self.assert_clean_host()

    def test_interleaved_attach_and_detach_of_one_volume(self):
        image = self.image('volume-mixed')
        props = self.props(image, 'wb')
        calls = ([(self.connector.connect_volume, props)] * 6 +
                 [(self.connector.disconnect_volume, props, None)] * 6)
        random.Random(7).shuffle(calls)
        self.run_all(calls)
        cores, mappings = self.cores(), self.mappings()
        # whatever order the locks gave, the host is consistent: attached
        # exactly once (core + mapping) or not at all
        self.assertIn((len(cores), len(mappings)), [(0, 0), (1, 1)])
        self.connector.disconnect_volume(props, None)
        self.assert_clean_host()
