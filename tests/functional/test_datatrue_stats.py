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

"""``casadm -P`` of a data-true host: the engine's own counters."""

import mmap
import os


from os_brick_cas.opencas import casadm_output
from tests.functional import base
from tests.functional.simulator import real_samples

LINE = 4096


def direct_io(path: str, offset: int, length: int,
              data: bytes = b'') -> bytes:
    """One O_DIRECT request (a write if *data* is given)."""
    buf = mmap.mmap(-1, length)
    buf.write(data)
    fd = os.open(path, (os.O_RDWR if data else os.O_RDONLY) | os.O_DIRECT)
    try:
        if data:
            os.pwritev(fd, [buf], offset)
        else:
            os.preadv(fd, [buf], offset)
    finally:
        os.close(fd)
    return bytes(buf)


class DataTrueStatsTestCase(base.FunctionalTestCase):

    caches = {1: 'wt', 2: 'wb'}
    datapath_lines = 256

    def stats(self, *argv: str) -> dict[str, str]:
        return casadm_output.parse_stats(self._tool('casadm', '-P', *argv,
                                                    '-o', 'csv'))

    def attach(self, image: str, mode: str) -> tuple[dict, dict]:
        props = self.props(self.image(image), mode)
        return props, self.connector.connect_volume(props)

    def test_request_and_usage_counters_come_from_the_engine(self):
        props, device = self.attach('counted', 'wt')
        path = device['path']
        direct_io(path, 0, 2 * LINE)                  # full miss
        direct_io(path, LINE, 2 * LINE)               # partial miss
        direct_io(path, 0, 3 * LINE)                  # hit
        direct_io(path, 0, LINE, b'W' * LINE)         # write hit
        [core] = self.cores()
        core_stats = self.stats('-i', '1', '-j', str(core.core_id))
        cache_stats = self.stats('-i', '1')
        expected = {'Occupancy [4KiB Blocks]': '3',
                    'Clean [4KiB Blocks]': '3',
                    'Dirty [4KiB Blocks]': '0',
                    'Read hits [Requests]': '1',
                    'Read partial misses [Requests]': '1',
                    'Read full misses [Requests]': '1',
                    'Read total [Requests]': '3',
                    'Write hits [Requests]': '1',
                    'Write total [Requests]': '1',
                    'Pass-Through reads [Requests]': '0'}
        for stats in (core_stats, cache_stats):
            self.assertEqual(expected, {key: stats[key] for key in expected})
        self.assertEqual('256', cache_stats['Cache Size [4KiB Blocks]'])
        # the same front-end and columns as the counter-only simulator
        for stats_argv, sample in (
                (('-i', '1'), real_samples.CACHE_STATS),
                (('-i', '1', '-j', str(core.core_id)),
                 real_samples.CORE_STATS)):
            produced = self._tool('casadm', '-P', *stats_argv, '-o', 'csv')
            self.assertEqual(','.join(real_samples.header(sample)),
                             produced.splitlines()[0])
        self.connector.disconnect_volume(props, device)
        self.assert_clean_host()

    def test_wb_dirty_lines_counted_until_the_detach_flush(self):
        props, device = self.attach('dirty', 'wb')
        direct_io(device['path'], 0, 5 * LINE, b'D' * 5 * LINE)
        [core] = self.cores()
        stats = self.stats('-i', '2', '-j', str(core.core_id))
        self.assertEqual(('5', '0', '1'), (
            stats['Dirty [4KiB Blocks]'], stats['Clean [4KiB Blocks]'],
            stats['Write full misses [Requests]']))
        self.assertEqual(5, self.dirty(core))
        self.connector.disconnect_volume(props, device)
        self.assertEqual(5, self.host.state()['flushed_blocks'])
        self.assert_clean_host()
