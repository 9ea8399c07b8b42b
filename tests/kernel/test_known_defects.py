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

"""The known-defect gate reads the real module's version and build.

On a release with a known write-back data-loss defect (v26.03), a new wb
attach is refused unless the operator accepts the defect or the loaded
module is a build whose manifest lists the fix (the role's patch series:
its srcversion is the one sysfs shows); on v24.9 and v25.12.2 it
attaches. The version comes from the loaded module's
/sys/module/cas_cache/version, the same module ``casadm -V`` reports.
"""

import os

from os_brick_cas import casadm
from os_brick_cas import exception
from os_brick_cas.opencas import known_defects
from os_brick_cas.opencas import releases
from tests.kernel import base


class KnownDefectGateTestCase(base.KernelTestCase):

    caches = {2: 'wb'}

    def test_wb_refused_only_on_a_release_with_the_defect(self):
        version = known_defects.loaded_version()
        listed = casadm.Casadm().version()['CAS Cache Kernel Module']
        self.assertEqual(releases.major_minor(listed),
                         releases.major_minor(version))
        module = known_defects.loaded_module()
        manifest = known_defects.read_manifest()
        # the tier installs the build's manifest; its srcversion is the
        # loaded module's (modinfo of the staged .ko = sysfs)
        self.assertIsNotNone(manifest)
        self.assertEqual(manifest['srcversion'], module.srcversion)
        patched = manifest['patches'] != []
        self.assertEqual(patched and version.startswith('26.03'),
                         'ocf-hit-invalid-backfill' in module.fixed,
                         module.note)
        self.conf.config(group='os_brick_cas', accepted_data_loss_defects=[])
        props = self.props(self.image('gate'), 'wb')
        if version.startswith('26.03') and not patched:
            error = self.assertRaises(exception.NoCacheForMode,
                                      self.connector.connect_volume, props)
            self.assertIn('ocf-hit-invalid-backfill', str(error))
            self.assertEqual([], self.cores())
            self.assertEqual([], self.mapped_devices())
            self.conf.config(group='os_brick_cas',
                             accepted_data_loss_defects=[
                                 'ocf-hit-invalid-backfill'])
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.assertEqual(core.exported, info['path'])
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.cores())

    def test_the_real_module_shows_use_io_scheduler_to_root(self):
        # doctor's check reads this file (0440): the real module has it,
        # at its default, so wt write hits take the write-through path
        self.assertEqual('1', known_defects.use_io_scheduler())
        self.assertEqual(0o440, os.stat(
            '/' + known_defects.SCHEDULER_FILE).st_mode & 0o777)
