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

"""A buffered reader racing write-back writes on never-cached lines.

udev's probe of /dev/casX-Y reads through the page cache (readahead), and
on the real kernel a wb write racing it once lost 15 blocks of one 64 KiB
request (issue 22). Here a buffered reader (dd without O_DIRECT, the page
cache dropped before each pass, as a fresh probe finds it) reads each
fresh MiB while the guest-like O_DIRECT writer writes it; after the detach
flush librbd must read every MiB back, whether a racing write was cached
dirty or passed through to Ceph.
"""

import os
import subprocess

import testtools

from tests.ceph import blockio
from tests.kernel import base
from tests import real_ceph

#: fresh MiBs written (4096 lines: well inside the brd cache's free lines,
#: so no eviction and no sequential cut-off of a full cache)
ROUNDS = 16


#: left out of the default run (CI): it reproduces an open defect below
#: the product in about one run of three (README, "The real-kernel tier")
BY_NAME_ONLY = ('reproduces an open data-loss race of Open CAS (README, '
                '"The real-kernel tier"); run it by name: '
                'tools/run-kernel-tests.sh test_reader_race')


@testtools.skipUnless(os.environ.get('OS_BRICK_CAS_KERNEL_BY_NAME') == '1',
                      BY_NAME_ONLY)
class BufferedReaderRaceTestCase(base.KernelTestCase):

    caches = {2: 'wb'}

    def test_wb_writes_racing_a_buffered_reader_reach_ceph(self):
        image = self.image('reader-race', size_mb=ROUNDS + 8)
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        path = info['path']
        written = []
        for index in range(ROUNDS):
            offset = index * base.MIB
            data = blockio.pattern('race-%d' % index, base.MIB)
            base.run('blockdev', '--flushbufs', path)
            reader = subprocess.Popen(
                ['dd', 'if=%s' % path, 'of=/dev/null', 'bs=4k',
                 'skip=%d' % (offset // 4096), 'count=256', 'status=none'])
            blockio.write_direct(path, offset, data)
            reader.wait(timeout=120)
            written.append((offset, data))
        [core] = self.cores()
        dirty = self.dirty(core)
        # what the cache gives back, to tell a write the cache holds but
        # never flushes (clean) from one it lost outright
        through_cache = {offset: blockio.read_direct(path, offset, len(data))
                         for offset, data in written}

        self.connector.disconnect_volume(props, info)

        in_ceph = [(offset, data,
                    real_ceph.read(base.CEPH_CONF, image, offset, len(data)))
                   for offset, data in written]
        missing = ['%d MiB: Ceph %s, cache %s' % (
                       offset // base.MIB, base.block_map(got, data),
                       base.block_map(through_cache[offset], data))
                   for offset, data, got in in_ceph if got != data]
        # not every line need be dirty: OCF may serve a write that races
        # the reader's miss on its lines pass-through, straight to Ceph
        # (4093 of 4096 lines were dirty in the first guest run, every
        # byte in Ceph); what must hold is that every byte is in Ceph after
        # the detach. The second run lost 7 blocks (4058 dirty): an open
        # data-safety defect below the product (issue 22), not a test fault
        self.assertEqual([], missing, 'dirty lines before the detach: %d '
                         'of %d' % (dirty, ROUNDS * 256))
        self.assert_clean_host()
