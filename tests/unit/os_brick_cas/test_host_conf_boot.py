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

"""opencas.conf [caches] rows of the host layout, and the boot-order checks."""

import os
import shutil

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from os_brick_cas import exception
from os_brick_cas.host import boot
from os_brick_cas.opencas import opencas_conf
from os_brick_cas import opts
from tests import casctl_conf_checker as checker

CONF_TEXT = """version=19.3.0
# kept
[caches]
1\t/dev/disk/by-id/nvme-A-part1\tWT
7\t/dev/disk/by-id/nvme-B\tWB\tcleaning_policy=acp
[cores]
7\t1\t/dev/disk/by-id/rbd-volumes-volume-a\tlazy_startup=true
"""
ROW_1 = opencas_conf.CacheRow(1, '/dev/disk/by-id/nvme-A-part1', 'wt', (
    ('cache_line_size', '4'), ('promotion_policy', 'nhit')))
ROW_2 = opencas_conf.CacheRow(2, '/dev/disk/by-id/nvme-A-part2', 'wb', (
    ('cache_line_size', '8'), ('cleaning_policy', 'alru')))
DROPIN = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                      'systemd', 'nova-compute.service.d',
                      'os-brick-cas.conf')


class CacheRowsTestCase(testtools.TestCase):

    def test_rows_replaced_or_added_everything_else_kept(self):
        text = opencas_conf.rewrite_caches(CONF_TEXT, [ROW_1, ROW_2])
        checker.check(text)
        lines = text.splitlines()
        self.assertEqual(['version=19.3.0', '# kept', '[caches]',
                          '1\t/dev/disk/by-id/nvme-A-part1\tWT\t'
                          'cache_line_size=4,promotion_policy=nhit',
                          '7\t/dev/disk/by-id/nvme-B\tWB\t'
                          'cleaning_policy=acp',
                          '2\t/dev/disk/by-id/nvme-A-part2\tWB\t'
                          'cache_line_size=8,cleaning_policy=alru',
                          '[cores]'], lines[:7])
        self.assertEqual(CONF_TEXT.split('[cores]\n')[1],
                         text.split('[cores]\n')[1])

    def test_rewrite_is_idempotent(self):
        once = opencas_conf.rewrite_caches(CONF_TEXT, [ROW_1, ROW_2])
        self.assertEqual(once, opencas_conf.rewrite_caches(once,
                                                           [ROW_1, ROW_2]))

    def test_empty_file_gets_version_and_sections(self):
        text = opencas_conf.rewrite_caches('', [ROW_2])
        checker.check(text)
        self.assertEqual(['version=19.3.0', '[caches]', ROW_2.render(),
                          '[cores]'], text.splitlines())

    def test_device_listed_under_another_id_is_refused(self):
        moved = opencas_conf.CacheRow(3, '/dev/disk/by-id/nvme-B', 'wb')
        exc = self.assertRaises(exception.OpenCasConfRefused,
                                opencas_conf.rewrite_caches, CONF_TEXT,
                                [moved])
        self.assertIn('already listed as cache instance 7', str(exc))

    def test_update_file_reports_change_once(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'opencas.conf')
        with open(path, 'w') as conf_file:
            conf_file.write(CONF_TEXT)
        self.assertTrue(opencas_conf.update_caches_file(path, [ROW_2]))
        self.assertFalse(opencas_conf.update_caches_file(path, [ROW_2]))


class BootOrderTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.opencas = os.path.join(self.root, 'opencas.conf')
        with open(self.opencas, 'w') as conf_file:
            conf_file.write(CONF_TEXT)
        self.conf.config(group=opts.GROUP, host_root=self.root,
                         opencas_conf=self.opencas)
        self.units = os.path.join(self.root, 'lib', 'systemd', 'system')
        os.makedirs(self.units)
        os.makedirs(os.path.join(self.root, 'run', 'systemd', 'system'))
        for unit in ('open-cas.service', 'nova-compute.service'):
            open(os.path.join(self.units, unit), 'w').close()

    def levels(self) -> dict[str, str]:
        return {message: level
                for level, message in boot.findings()}

    def test_missing_dropin_warns_and_the_shipped_one_passes(self):
        [(message, level)] = [item for item in self.levels().items()
                              if 'nova-compute.service' in item[0]]
        self.assertEqual('WARN', level)
        self.assertIn('is not ordered after open-cas.service', message)
        target = os.path.join(self.root, 'etc', 'systemd', 'system',
                              'nova-compute.service.d')
        os.makedirs(target)
        shutil.copy(DROPIN, target)
        self.assertEqual({'nova-compute.service starts after '
                          'open-cas.service': 'OK'}, self.levels())

    def test_core_row_without_lazy_startup_fails(self):
        with open(self.opencas, 'a') as conf_file:
            conf_file.write('7\t2\t/dev/disk/by-id/rbd-volumes-volume-b\n')
        fails = [m for m, level in self.levels().items() if level == 'FAIL']
        self.assertEqual(1, len(fails))
        self.assertIn('volume-b" without lazy_startup=true', fails[0])

    def test_open_cas_unit_missing_and_not_systemd(self):
        os.unlink(os.path.join(self.units, 'open-cas.service'))
        self.assertIn('open-cas.service is not installed: nothing loads '
                      'the caches of opencas.conf at boot (install Open '
                      "CAS's utils: make -C utils install_files).",
                      self.levels())
        shutil.rmtree(os.path.join(self.root, 'run'))
        [(message, level)] = self.levels().items()
        # a check that did not run is SKIP, never OK (issue 23, 3)
        self.assertEqual('SKIP', level)
        self.assertIn('systemd does not run under', message)
