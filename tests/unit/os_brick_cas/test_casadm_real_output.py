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

"""The product's parsers on real casadm v26.03.2 output (golden samples)."""

from unittest import mock

import testtools

from os_brick_cas import casadm
from os_brick_cas.opencas import casadm_output
from os_brick_cas.privileged import casadm as priv_casadm
from tests.functional.simulator import real_samples


def stdout(name: str) -> str:
    return real_samples.real_sample(name)[2]


class RealOutputTestCase(testtools.TestCase):

    def test_cache_clean_with_dirty_blocks_is_dirty(self):
        # the first second of dirty data: "Dirty for" reads "Cache clean"
        stats = casadm_output.parse_stats(stdout(real_samples.CORE_STATS))
        self.assertEqual('2', stats['Dirty for [s]'])
        cache_stats = casadm_output.parse_stats(
            stdout(real_samples.CACHE_STATS))
        self.assertEqual(('0', 'Cache clean', '1024'), (
            cache_stats['Dirty for [s]'], cache_stats['Dirty for'],
            cache_stats[casadm_output.DIRTY_BLOCKS]))
        core = casadm_output.Core(1, 1, '/dev/disk/by-id/x', 'Active', None)
        with mock.patch.object(priv_casadm, 'stats',
                               return_value=(0, stdout(
                                   real_samples.CACHE_STATS), '')):
            self.assertEqual(1024, casadm.Casadm().dirty_blocks(core))

    def test_list_forms(self):
        [cache] = casadm_output.parse_list(stdout('041-casadm-L-csv-b.txt'))
        self.assertEqual([('/dev/disk/by-id/rbd-cas-e1bc46253e2c45a9a5413d8'
                           'aa4ee3cf9-rbd--vol1', 'Active', '/dev/cas1-1')],
                         [(c.device, c.status, c.exported)
                          for c in cache.cores])
        self.assertEqual([], casadm_output.parse_list(stdout(
            '114-casadm-L-csv-core-pool.txt')))
        self.assertEqual(['/dev/disk/by-id/rbd-cas-e1bc46253e2c45a9a5413d8aa4'
                          'ee3cf9-rbd--vol1'],
                         casadm_output.parse_core_pool(stdout(
                             '114-casadm-L-csv-core-pool.txt')))
        self.assertEqual([], casadm_output.parse_core_pool(stdout(
            '041-casadm-L-csv-b.txt')))
        self.assertEqual([], casadm_output.parse_core_pool(stdout(
            '116-casadm-L-csv-final.txt')))

    def test_io_class_allocations(self):
        table = casadm_output.parse_io_classes(stdout('056-casadm-C-L.txt'))
        self.assertEqual([(0, 1.0), (1, 0.0)],
                         [(c.class_id, c.allocation) for c in table])
