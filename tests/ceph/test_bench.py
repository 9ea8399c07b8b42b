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

"""``os-brick-cas bench`` on a real RBD-backed block device.

Runs the seed-style table for a few seconds on the raw mapped RBD device
and on the /dev/casX-Y of the same volume. The table is written to
``CEPH_BENCH_OUTPUT`` (default .ceph-bench.txt) so the CI log can show it:
it is loopback memstore Ceph through rbd-fuse + loop on the CI machine,
with the userspace data-true Open CAS stand-in (FUSE + loop, metadata
synced on every write) -- not a hardware figure.
"""

import contextlib
import io
import json
import os

from os_brick_cas.cmd import main as cli
from tests.ceph import base

WHERE = ('loopback memstore Ceph via rbd-fuse + loop on this CI machine; '
         'Open CAS is the userspace stand-in over loopback Ceph -- NOT a '
         'hardware figure')


class BenchOnRealRbdTestCase(base.CephTestCase):

    def cli(self, *argv: str) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(list(argv))
        return code, out.getvalue()

    def test_bench_table_on_rbd_and_cas_device_of_one_volume(self):
        volume = self.create('wt')
        data, device = self.attach(volume)
        self.addCleanup(self.connector.disconnect_volume, data, device)
        rbd_path = '/dev/rbd/%s/%s' % (base.POOL, volume.name)
        argv = ['bench', '--device', 'ceph=' + rbd_path, '--device',
                'cas=' + device['path'], '--runtime',
                os.environ.get('CEPH_BENCH_RUNTIME', '2'), '--destroy-data',
                # the first 64 MiB only: memstore keeps every written
                # byte in the OSD's RAM and blocks writes when full
                '--size', '64M',
                '--profiles', 'randread-qd1,randwrite-qd1,randrw70-qd16',
                '--where', WHERE]
        code, table = self.cli(*argv)
        self.assertEqual(0, code)
        self.assertIn('NOT a hardware figure', table)
        with open(os.environ.get('CEPH_BENCH_OUTPUT', '.ceph-bench.txt'),
                  'w') as output:
            output.write(table)
        code, text = self.cli(*(argv + ['--json']))
        self.assertEqual(0, code)
        results = json.loads(text)['results']
        self.assertEqual(6, len(results))
        for result in results:
            for direction in ('read', 'write'):
                if direction in result:
                    self.assertGreater(result[direction]['iops'], 0)
        # the bench wrote through the device: Ceph has non-zero data now
        # (in the first 64 MiB, the only part fio was given)
        written = self.read_from_ceph(volume.name, 0, 64 * 2 ** 20)
        self.assertNotEqual(bytes(len(written)), written)
