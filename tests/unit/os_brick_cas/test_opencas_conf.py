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

import os
import stat

from os_brick_cas import opencas_conf
from tests.unit.os_brick_cas import base

TEMPLATE = """version=19.3.0
# comment kept
[caches]
## Cache ID\tCache device\tCache mode\tExtra fields (optional)
1\t/dev/disk/by-id/nvme-Optane-part1\tWT
2\t/dev/disk/by-id/nvme-Optane-part2\tWB\tcleaning_policy=acp
[cores]
## Cache ID\tCore ID\tCore device
2\t1\t/dev/disk/by-id/rbd-volumes-volume-a\tlazy_startup=true
"""


class OpenCasConfTestCase(base.TestCase):

    def test_parse(self):
        parsed = opencas_conf.parse(TEMPLATE)
        self.assertEqual({1: 'WT', 2: 'WB'}, parsed.caches)
        self.assertTrue(parsed.lists_core(
            2, 1, '/dev/disk/by-id/rbd-volumes-volume-a'))
        self.assertFalse(parsed.lists_core(2, 1, '/dev/disk/by-id/other'))

    def test_add_keeps_everything_else(self):
        row = opencas_conf.CoreRow(2, 2, '/dev/disk/by-id/rbd-volumes-b')
        text = opencas_conf.rewrite(TEMPLATE, add=row)
        self.assertEqual(TEMPLATE + '2\t2\t/dev/disk/by-id/rbd-volumes-b\t'
                                    'lazy_startup=true\n', text)

    def test_add_replaces_same_core_and_remove(self):
        row = opencas_conf.CoreRow(2, 1, '/dev/disk/by-id/rbd-volumes-new')
        text = opencas_conf.rewrite(TEMPLATE, add=row)
        self.assertEqual({(2, 1): '/dev/disk/by-id/rbd-volumes-new'},
                         opencas_conf.parse(text).cores)
        removed = opencas_conf.rewrite(text, remove=(2, 1))
        self.assertEqual({}, opencas_conf.parse(removed).cores)
        self.assertIn('cleaning_policy=acp', removed)
        self.assertIn('# comment kept', removed)

    def test_add_creates_cores_section(self):
        text = opencas_conf.rewrite('version=19.3.0\n[caches]\n1\t/d\tWB\n',
                                    add=opencas_conf.CoreRow(1, 0, '/x'))
        self.assertEqual({(1, 0): '/x'}, opencas_conf.parse(text).cores)

    def test_update_file_atomic_keeps_mode(self):
        path = os.path.join(self.tmp, 'opencas.conf')
        with open(path, 'w') as conf_file:
            conf_file.write(TEMPLATE)
        os.chmod(path, 0o600)
        opencas_conf.update_file(path, remove=(2, 1))
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        self.assertEqual({}, opencas_conf.read(path).cores)
        self.assertEqual(['opencas.conf'], os.listdir(self.tmp))

    def test_missing_file(self):
        path = os.path.join(self.tmp, 'missing.conf')
        self.assertEqual({}, opencas_conf.read(path).caches)
        opencas_conf.update_file(path, remove=(1, 1))
        self.assertFalse(os.path.exists(path))
