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

"""A host "reboot" with dirty write-back data, and Open CAS's own loading.

The reboot is simulated in the running guest (a real guest reboot would
lose the brd cache device): ``casadm -T -n`` stops the instance without
flushing, as a crash would leave it, and the krbd device is unmapped, as
none survives a reboot. Then Open CAS's own boot-time tool, ``casctl
start``, reads the opencas.conf the product wrote and loads the instance
(``casadm -S -d <dev> -l``): the core comes back Inactive, its dirty data
kept. Attaching the volume again re-activates it (the product's try-add,
or Open CAS's udev loader reacting to the by-id link first).
"""

import subprocess

from tests.ceph import blockio
from tests.kernel import base

OPENCAS_PY = '/lib/opencas'


class RebootTestCase(base.KernelTestCase):

    caches = {2: 'wb'}

    def _opencas_conf_as_open_cas_reads_it(self) -> str:
        """Open CAS's own parser (utils/opencas.py), strict mode."""
        done = subprocess.run(
            ['python3', '-c', 'import sys, opencas\n'
             'c = opencas.cas_config.from_file(sys.argv[1])\n'
             'for core in c.cores:\n'
             '    print(core.cache_id, core.core_id, core.device,\n'
             '          core.is_lazy())\n', base.OPENCAS_CONF],
            capture_output=True, text=True, cwd=OPENCAS_PY)
        self.assertEqual(0, done.returncode, done.stderr)
        return done.stdout

    def test_dirty_core_survives_reboot_and_is_reactivated(self):
        image = self.image('reboot')
        props = self.props(image, 'wb')
        data = blockio.pattern('reboot-' + image, base.MIB)
        info = self.connector.connect_volume(props)
        digest = self.write(info['path'], 0, data)
        [core] = self.cores()
        listed = '%d %d %s True\n' % (core.cache_id, core.core_id,
                                      core.device)
        self.assertEqual(listed, self._opencas_conf_as_open_cas_reads_it())

        # -- the "reboot" -------------------------------------------------
        self.casadm_ok('-T', '-i', '2', '-n', golden='stop-cache-no-flush')
        self.assertEqual(0, base.run('rbd', 'unmap',
                                     self.mapped_devices()[0]).returncode)
        base.run('udevadm', 'settle', '-t', '30')
        refused = self.cas('-S', '-i', '2', '-d', '/dev/ram1', '-l',
                           golden='start-cache-load-with-id')
        self.assertEqual(1, refused.returncode)
        started = base.run('casctl', 'start')
        self.assertEqual(0, started.returncode, started.stderr)
        self.casadm_ok('-L', '-o', 'csv', '-b', golden='list-csv-b-inactive')
        [cache] = self.cache_list()
        [inactive] = cache.cores
        self.assertEqual(('Incomplete', 'Inactive', core.core_id),
                         (cache.status, inactive.status, inactive.core_id))
        self.assertEqual(256, self.dirty(inactive,
                                         golden='stats-core-csv-inactive'))
        self.assertNotEqual(digest, self.in_ceph(image, 0, base.MIB))
        self.cas('-F', '-i', '2', golden='flush-cache-incomplete')
        # os-brick-cas does not drain on an Incomplete instance
        self.assertIn('Incomplete', self.connector.drain_blocker(props))

        # -- attach again: the same core, its dirty data, re-activated ----
        again = self.connector.connect_volume(props)

        self.assertEqual(info['path'], again['path'])
        [cache] = self.cache_list()
        [active] = cache.cores
        self.assertEqual(('Running', 'Active'), (cache.status,
                                                 active.status))
        self.assertEqual(256, self.dirty(active))
        self.assertEqual(digest, self.read(again['path'], 0, base.MIB))
        self.assertNotEqual(digest, self.in_ceph(image, 0, base.MIB))

        self.connector.disconnect_volume(props, again)

        self.assertEqual(digest, self.in_ceph(image, 0, base.MIB))
        self.assert_clean_host()
