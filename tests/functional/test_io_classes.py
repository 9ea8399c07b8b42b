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

"""``casadm --io-class`` of the stand-in: load (-C -C) and list (-C -L)."""

import mmap
import os
import subprocess


from os_brick_cas.opencas import casadm_output
from tests.functional import base

HEADER = 'IO class id,IO class name,Eviction priority,Allocation'


def run(*argv: str, stdin: str = '') -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True,
                          input=stdin, env=os.environ.copy())


class IoClassCliTestCase(base.FunctionalTestCase):
    """The counter-only simulator stores and lists the table."""

    caches = {1: 'wb', 2: 'wt'}

    def load(self, text: str, cache_id: int = 1,
             long_options: bool = False) -> subprocess.CompletedProcess:
        path = os.path.join(self.tmp, 'ioclass.csv')
        with open(path, 'w') as config:
            config.write(text)
        if long_options:
            return run('casadm', '--io-class', '--load-config', '--cache-id',
                       str(cache_id), '--file', path)
        return run('casadm', '-C', '-C', '-i', str(cache_id), '-f', path)

    def listed(self, cache_id: int = 1) -> str:
        done = run('casadm', '-C', '-L', '-i', str(cache_id), '-o', 'csv')
        self.assertEqual((0, ''), (done.returncode, done.stderr))
        return done.stdout

    def test_default_table(self):
        self.assertEqual(HEADER + '\n0,unclassified,255,1.00\n',
                         self.listed())

    def test_load_replaces_the_whole_table_and_lists_it(self):
        first = self.load(HEADER + '\n0,unclassified,255,1\n'
                          '1,core_id:eq:1,10,0.5\n2,core_id:eq:2,,0.25\n')
        self.assertEqual((0, '', ''), (first.returncode, first.stdout,
                                       first.stderr))
        self.assertEqual(HEADER + '\n0,unclassified,255,1.00\n'
                         '1,core_id:eq:1,10,0.50\n2,core_id:eq:2,,0.25\n',
                         self.listed())
        # any column order; classes missing from the file are removed
        second = self.load('Allocation,IO class name,IO class id,'
                           'Eviction priority\n1.0,unclassified,0,255\n'
                           '0,core_id:eq:3&done,3,1\n', long_options=True)
        self.assertEqual(0, second.returncode, second.stderr)
        self.assertEqual(HEADER + '\n0,unclassified,255,1.00\n'
                         '3,core_id:eq:3&done,1,0.00\n', self.listed())
        self.assertEqual(HEADER + '\n0,unclassified,255,1.00\n',
                         self.listed(2))

    def test_load_from_stdin(self):
        done = run('casadm', '-C', '-C', '-i', '2', '-f', '-',
                   stdin=HEADER + '\n0,unclassified,255,1\n'
                   '5,core_id:eq:7&done,1,0\n')
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('5,core_id:eq:7&done,1,0.00', self.listed(2))

    def test_table_kept_across_reboot(self):
        self.load(HEADER + '\n0,unclassified,255,1\n1,core_id:eq:1,1,0\n')
        self.host.reboot()
        self.assertIn('1,core_id:eq:1,1,0.00', self.listed())

    def test_33_classes_at_most(self):
        rows = ''.join('%d,core_id:eq:%d,1,0.01\n' % (i, i)
                       for i in range(1, 33))
        text = HEADER + '\n0,unclassified,255,1\n' + rows
        self.assertEqual(0, self.load(text).returncode)
        self.assertEqual(34, len(self.listed().splitlines()))
        done = self.load(text + '33,core_id:eq:33,1,0.01\n')
        self.assertEqual((1, 'Invalid id, must be in the range 0-32.\n'
                          'Cannot parse configuration file - error in line '
                          '35 in column 1 (IO class id).\n'),
                         (done.returncode, done.stderr))
        self.assertEqual(34, len(self.listed().splitlines()))

    def test_refusals_print_what_casadm_prints(self):
        for text, cache_id, stderr in (
                (HEADER + '\n0,unclassified,255,1\n', 9,
                 'Cache ID does not exist\n'),
                ('', 1, 'Empty IO Classes configuration file supplied.\n'),
                ('IO class id,Name\n', 1,
                 'Cannot parse configuration file - unknown column "Name".'
                 '\n'),
                (HEADER + '\n0,default,255,1\n', 1,
                 "IO class 0 must have the default name 'unclassified'\n"
                 'Cannot parse configuration file - error in line 2 in '
                 'column 2 (IO class name).\n'),
                (HEADER + '\n0,unclassified,255,1\n0,unclassified,255,1\n',
                 1, 'Double configuration for IO class id 0\nCannot parse '
                    'configuration file - error in line 3 in column 1 (IO '
                    'class id).\n'),
                (HEADER + '\n0,unclassified,255,1.5\n', 1,
                 'Cannot parse configuration file - error in line 2 in '
                 'column 4 (Allocation).\n'),
                (HEADER + '\n0,unclassified,256,1\n', 1,
                 'Invalid prio, must be in the range 0-255.\nCannot parse '
                 'configuration file - error in line 2 in column 3 '
                 '(Eviction priority).\n'),
                (HEADER + '\n0,unclassified,255,1\n1,core_id:eq:x,1,0\n',
                 1, 'Invalid classification rule syntax\n'),
                (HEADER + '\n0,unclassified,255,1\n1,colour:eq:1,1,0\n',
                 1, 'Unexpected classification rule condition\n'),
                (HEADER + '\n', 1, 'Empty configuration file\n')):
            done = self.load(text, cache_id)
            self.assertEqual((1, stderr), (done.returncode,
                                           done.stderr[:len(stderr)]),
                             text)
        self.assertEqual(HEADER + '\n0,unclassified,255,1.00\n',
                         self.listed())

    def test_missing_sub_command_and_options(self):
        done = run('casadm', '--io-class', '-i', '1')
        self.assertEqual(1, done.returncode)
        self.assertIn('Invalid or missing first sub-command parameter',
                      done.stderr)
        done = run('casadm', '-C', '-C', '-i', '1')
        self.assertEqual((1, "Option '--file (-f)' is missing\n"),
                         (done.returncode, done.stderr))
        done = run('casadm', '-C', '-C', '-i', '1', '-f', '/nonexistent')
        self.assertEqual((1, 'Cannot open configuration file /nonexistent'
                             '\n'), (done.returncode, done.stderr))


class DataTrueIoClassTestCase(base.FunctionalTestCase):
    """A data-true host: the loaded table steers real bytes."""

    caches = {1: 'wt', 2: 'wb'}
    datapath_lines = 256

    def core_file(self, core: casadm_output.Core) -> bytes:
        with open(os.path.realpath(core.device), 'rb') as device:
            return device.read(64 * 1024)

    def stats(self, core: casadm_output.Core) -> dict:
        return casadm_output.parse_stats(self._tool(
            'casadm', '-P', '-i', str(core.cache_id), '-j',
            str(core.core_id), '-o', 'csv'))

    @staticmethod
    def write(path: str, offset: int, data: bytes) -> None:
        """One O_DIRECT write request, as a guest issues it."""
        buf = mmap.mmap(-1, len(data))
        buf.write(data)
        fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
        try:
            os.pwritev(fd, [buf], offset)
        finally:
            os.close(fd)

    @staticmethod
    def read(path: str, offset: int, length: int) -> bytes:
        """One O_DIRECT read request."""
        buf = mmap.mmap(-1, length)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            os.preadv(fd, [buf], offset)
        finally:
            os.close(fd)
        return bytes(buf)

    def test_allocation_zero_class_sends_writes_to_the_core(self):
        props = self.props(self.image('drain'), 'wb')
        device = self.connector.connect_volume(props)
        [core] = self.cores()
        self.write(device['path'], 0, b'A' * 8192)
        self.assertEqual(2, self.dirty(core))
        self.assertEqual(b'\0' * 8192, self.core_file(core)[:8192])
        rows = (HEADER + '\n0,unclassified,255,1\n'
                '1,core_id:eq:%d&done,1,0\n' % core.core_id)
        done = run('casadm', '-C', '-C', '-i', '2', '-f', '-', stdin=rows)
        self.assertEqual(0, done.returncode, done.stderr)
        # loading the table cleans nothing; the flush does
        self.assertEqual(2, self.dirty(core))
        self._tool('casadm', '-F', '-i', '2', '-j', str(core.core_id))
        self.assertEqual(0, self.dirty(core))
        self.assertEqual(b'A' * 8192, self.core_file(core)[:8192])
        # from now on writes are synchronous to the core, reads bypass
        self.write(device['path'], 4096, b'B' * 4096)
        self.assertEqual(0, self.dirty(core))
        self.assertEqual(b'A' * 4096 + b'B' * 4096,
                         self.core_file(core)[:8192])
        self.assertEqual(b'A' * 4096, self.read(device['path'], 0, 4096))
        stats = self.stats(core)
        self.assertEqual(('0', '1', '1'), (
            stats['Occupancy [4KiB Blocks]'],
            stats['Pass-Through writes [Requests]'],
            stats['Pass-Through reads [Requests]']))
        self.connector.disconnect_volume(props, device)
        self.assert_clean_host()
