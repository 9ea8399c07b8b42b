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

"""The stand-in casadm's IO-class CSV parser and list formatter."""

import testtools

from cas_standin import ioclass

HEADER = 'IO class id,IO class name,Eviction priority,Allocation'


class IoClassParseTestCase(testtools.TestCase):

    def test_rows_sorted_pinned_and_percent(self):
        rows = ioclass.parse(HEADER + '\n\n2,core_id:eq:2,,.255\n'
                             '0,unclassified,255,1\n')
        # .255 -> 25.5 as a C float -> 26 % (casadm rounds half up)
        self.assertEqual([[0, 'unclassified', 255, 100],
                          [2, 'core_id:eq:2', None, 26]], rows)
        self.assertEqual(HEADER + '\n0,unclassified,255,1.00\n'
                         '2,core_id:eq:2,,0.26\n', ioclass.list_csv(rows))

    def test_allocation_longer_than_4_characters_refused(self):
        err = self.assertRaises(ioclass.IoClassError, ioclass.parse,
                                HEADER + '\n0,unclassified,255,0.125\n')
        self.assertEqual('Cannot parse configuration file - error in line 2 '
                         'in column 4 (Allocation).\n', str(err))

    def test_wrong_column_count(self):
        err = self.assertRaises(ioclass.IoClassError, ioclass.parse,
                                HEADER + '\n0,unclassified,255\n')
        self.assertEqual('Cannot parse configuration file - error in line '
                         '2.\n', str(err))

    def test_missing_column(self):
        err = self.assertRaises(ioclass.IoClassError, ioclass.parse,
                                'IO class id,IO class name,Allocation\n')
        self.assertTrue(str(err).startswith(
            'Cannot parse configuration file - missing column "Eviction '
            'priority".\nFailed to parse I/O classes configuration file '
            'header.'), str(err))

    def test_rules(self):
        ioclass.check_rules([[0, 'unclassified', 255, 100],
                             [1, 'core_id:eq:4&done', 1, 0]])
        for name, message in (
                ('core_id:gt:4', 'Invalid classification rule syntax\n'),
                ('file_size:gt:4', 'IO class condition file_size is not '
                                   'simulated'),
                ('nonsense', 'Unexpected classification rule condition\n')):
            err = self.assertRaises(ioclass.IoClassError,
                                    ioclass.check_rules,
                                    [[0, 'unclassified', 255, 100],
                                     [1, name, 1, 0]])
            self.assertTrue(str(err).startswith(message), str(err))
