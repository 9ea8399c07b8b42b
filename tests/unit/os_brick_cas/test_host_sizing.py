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

"""Sizing math: RAM and metadata per line size, drain time, host files."""

import os

import fixtures
import testtools

from os_brick_cas.host import sizing

GIB, MIB = 2 ** 30, 2 ** 20


class SizingTestCase(testtools.TestCase):

    def test_published_points_are_reproduced(self):
        # Open CAS system requirements: 2.05 % at 4 KiB, 0.175 % at 64 KiB
        self.assertAlmostEqual(0.0205, sizing.metadata_fraction(4))
        self.assertAlmostEqual(0.00175, sizing.metadata_fraction(64))

    def test_between_the_points_bytes_per_line_grow_with_sectors(self):
        per_line = [sizing.metadata_fraction(kib) * kib * 1024
                    for kib in (4, 8, 16, 32, 64)]
        steps = [b - a for a, b in zip(per_line, per_line[1:])]
        # linear in 512-byte sectors: each step doubles with the line
        for small, big in zip(steps, steps[1:]):
            self.assertAlmostEqual(2 * small, big)

    def test_bigger_lines_never_need_more(self):
        for size in (1, 4096, 10 ** 9, 375 * GIB, 2 ** 44 - 1):
            for line in (4, 8, 16, 32):
                self.assertGreaterEqual(sizing.metadata_bytes(size, line),
                                        sizing.metadata_bytes(size, line * 2))

    def test_host_ram_and_nova_reservation(self):
        ram = sizing.host_ram_bytes([sizing.metadata_bytes(100 * GIB, 4)])
        self.assertEqual(GIB + 2099.2 * MIB, round(ram / MIB, 1) * MIB)
        self.assertEqual(512 + 1024 + 2100,
                         sizing.reserved_host_memory_mb(ram))

    def test_worst_dirty_and_drain_time(self):
        self.assertEqual(100 * GIB, sizing.worst_dirty_bytes(100 * GIB,
                                                             None))
        self.assertEqual(20 * GIB, sizing.worst_dirty_bytes(100 * GIB, 20))
        self.assertEqual(102.4, sizing.drain_seconds(20 * GIB, 200))

    def test_meminfo_and_device_size_under_a_root(self):
        root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(root, 'proc'))
        with open(os.path.join(root, 'proc', 'meminfo'), 'w') as info:
            info.write('MemTotal:       65536 kB\nMemAvailable:   '
                       '32768 kB\nHugePages_Total:       0\n')
        self.assertEqual({'MemTotal': 64 * MIB, 'MemAvailable': 32 * MIB,
                          'HugePages_Total': 0}, sizing.meminfo(root))
        os.makedirs(os.path.join(root, 'dev', 'disk', 'by-id'))
        os.makedirs(os.path.join(root, 'sys', 'class', 'block',
                                 'nvme0n1p2'))
        os.symlink('../../nvme0n1p2', os.path.join(
            root, 'dev', 'disk', 'by-id', 'nvme-X-part2'))
        with open(os.path.join(root, 'sys', 'class', 'block', 'nvme0n1p2',
                               'size'), 'w') as size:
            size.write('2097152\n')
        self.assertEqual(GIB, sizing.block_device_bytes(
            '/dev/disk/by-id/nvme-X-part2', root))
        self.assertIsNone(sizing.block_device_bytes('/dev/disk/by-id/no',
                                                    root))


class ShareSizingTestCase(testtools.TestCase):

    def test_a_share_is_whole_lines_rounded_up(self):
        # 10 lines of 64 KiB: 25% is 2.5 lines, so 3
        self.assertEqual(3 * 64 * sizing.KIB,
                         sizing.share_bytes(10 * 64 * sizing.KIB, 64, 25))
        self.assertEqual(0, sizing.share_bytes(0, 4, 25))

    def test_drains_take_ids_shares_take_ids_and_percent(self):
        self.assertEqual((32, 100), sizing.share_room(0, []))
        self.assertEqual((28, 55), sizing.share_room(2, [30, 15]))
        self.assertEqual((0, 0), sizing.share_room(32, [60, 50]))
