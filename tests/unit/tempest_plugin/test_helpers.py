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

"""The tempest plugin's helper logic, without a cloud.

The guest commands are run here for real, by /bin/sh on a sparse file
standing in for the guest's disk.
"""

import os
import subprocess

import fixtures
import testtools

from os_brick_cas_tempest_plugin import helpers

VOLUME = '0d6c3a4e-3c5b-4d5e-9f1a-2b3c4d5e6f70'
OTHER = '0d6c3a4e-3c5b-4d5e-9f1a-2b3c4d5e6f71'

# casadm 26.03 list output (-o csv -b): core pool, a wb and a wt cache.
CASADM_LIST = '\n'.join([
    'type,id,disk,status,write policy,device',
    'core pool,-,-,-,-,-',
    'core,-,/dev/disk/by-id/rbd-volumes-volume-%s,Detached,-,-' % OTHER,
    'cache,1,/dev/disk/by-id/nvme-SSD_1-part1,Running,wb,-',
    'core,1,/dev/disk/by-id/rbd-volumes-volume-%s,Active,-,/dev/cas1-1'
    % VOLUME,
    'core,2,/dev/disk/by-id/rbd-volumes-volume-%s-x,Inactive,-,-' % VOLUME,
    'cache,2,/dev/disk/by-id/nvme-SSD_1-part2,Incomplete,wt,-',
    'core,1,/dev/rbd3,"Flushing (42.0 %)",-,/dev/cas2-1',
    ''])


class ModeAndSkipTestCase(testtools.TestCase):

    def test_dirty_modes_are_write_back_and_write_only(self):
        self.assertEqual(('wb', 'wo'), helpers.DIRTY_MODES)
        self.assertEqual(['wb', 'wo'], [m for m in helpers.ALL_MODES
                                        if helpers.holds_dirty_data(m)])

    def test_extra_specs_of_a_mode(self):
        self.assertEqual({'cacheable': '<is> True', 'cas:cache_mode': 'wb'},
                         helpers.volume_type_extra_specs('wb'))
        self.assertRaises(ValueError, helpers.volume_type_extra_specs, 'WB')

    def test_disabled_feature_skips_every_mode(self):
        reason = helpers.mode_skip_reason(False, ['wt', 'wb'], 'wt')
        self.assertIn('[os_brick_cas_tempest] enabled = False', reason)
        self.assertEqual(reason, helpers.feature_skip_reason(False))
        self.assertIsNone(helpers.feature_skip_reason(True))

    def test_mode_not_offered(self):
        reason = helpers.mode_skip_reason(True, ['wt', 'wb'], 'wo')
        self.assertIn('mode wo is not offered', reason)
        self.assertIn('offered_modes = wt,wb', reason)
        self.assertIn('<empty>', helpers.mode_skip_reason(True, [], 'wt'))

    def test_offered_mode_runs(self):
        self.assertIsNone(helpers.mode_skip_reason(True, ['wt', 'wb'], 'wb'))

    def test_unknown_mode_is_a_programming_error(self):
        self.assertRaises(ValueError, helpers.mode_skip_reason, True,
                          ['wt'], 'writeback')

    def test_volume_type_of_mode(self):
        types = {'wt': ' cas-wt ', 'wb': 'cas-wb', 'wo': ''}
        self.assertEqual('cas-wt', helpers.volume_type_for_mode(types, 'wt'))
        self.assertEqual('cas-wb', helpers.volume_type_for_mode(types, 'wb'))
        for mode in ('wo', 'pt'):
            exc = self.assertRaises(helpers.ConfigurationError,
                                    helpers.volume_type_for_mode, types, mode)
            self.assertIn('mode %s is offered' % mode, str(exc))

    def test_host_access(self):
        self.assertIn('compute_host_access = False',
                      helpers.host_access_skip_reason(False, 'stack', None))
        self.assertIsNone(helpers.host_access_skip_reason(
            True, 'stack', '/etc/key'))
        exc = self.assertRaises(helpers.ConfigurationError,
                                helpers.host_access_skip_reason,
                                True, 'stack', '')
        self.assertIn('compute_ssh_key_file', str(exc))
        self.assertNotIn('compute_ssh_user', str(exc))
        exc = self.assertRaises(helpers.ConfigurationError,
                                helpers.host_access_skip_reason,
                                True, None, None)
        self.assertIn('compute_ssh_user and compute_ssh_key_file', str(exc))

    def test_compute_host_address(self):
        addresses = {'compute1': '192.0.2.11'}
        self.assertEqual('192.0.2.11',
                         helpers.compute_host_address('compute1', addresses))
        self.assertEqual('compute2',
                         helpers.compute_host_address('compute2', addresses))


class GuestPatternTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.disk = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'vdb')
        with open(self.disk, 'wb') as disk:
            disk.truncate(16 * 1024 * 1024)

    def sh(self, command):
        return subprocess.run(['/bin/sh', '-c', command], check=True,
                              capture_output=True, text=True).stdout

    def read_block(self, block):
        with open(self.disk, 'rb') as disk:
            disk.seek(block * helpers.GUEST_BLOCK_SIZE)
            return disk.read(helpers.GUEST_BLOCK_SIZE)

    def test_blocks_are_printable_and_unique(self):
        pattern = helpers.GuestPattern(VOLUME)
        first, second = (pattern.block_data(b) for b in pattern.blocks)
        self.assertEqual(helpers.GUEST_BLOCK_SIZE, len(first))
        self.assertTrue(first.decode('ascii').isprintable())
        self.assertIn(VOLUME.encode(), first)
        self.assertNotEqual(first, second)
        self.assertNotEqual(first,
                            helpers.GuestPattern(OTHER).block_data(0))

    def test_token_must_be_shell_safe(self):
        for token in ('', 'a b', '$(reboot)', "x'y", 'x' * 65):
            self.assertRaises(ValueError, helpers.GuestPattern, token)

    def test_write_then_read_back(self):
        pattern = helpers.GuestPattern(VOLUME)
        self.sh(pattern.write_command(self.disk, sudo=False))
        for block in pattern.blocks:
            self.assertEqual(pattern.block_data(block),
                             self.read_block(block))
        self.assertEqual(16 * 1024 * 1024, os.path.getsize(self.disk))
        output = self.sh(pattern.read_command(self.disk, sudo=False))
        self.assertEqual([], pattern.mismatches(output))

    def test_changed_block_is_reported(self):
        pattern = helpers.GuestPattern(VOLUME)
        self.sh(pattern.write_command(self.disk, sudo=False))
        with open(self.disk, 'r+b') as disk:
            disk.seek(2560 * helpers.GUEST_BLOCK_SIZE + 100)
            disk.write(b'#')
        [mismatch] = pattern.mismatches(
            self.sh(pattern.read_command(self.disk, sudo=False)))
        self.assertEqual(2560, mismatch.block)
        self.assertIn('offset 10485760', str(mismatch))

    def test_unwritten_disk_and_other_volume_do_not_match(self):
        pattern = helpers.GuestPattern(VOLUME)
        read = pattern.read_command(self.disk, sudo=False)
        self.assertEqual(2, len(pattern.mismatches(self.sh(read))))
        self.sh(helpers.GuestPattern(OTHER).write_command(self.disk,
                                                          sudo=False))
        self.assertEqual(2, len(pattern.mismatches(self.sh(read))))

    def test_short_disk_reads_nothing(self):
        pattern = helpers.GuestPattern(VOLUME)
        with open(self.disk, 'r+b') as disk:
            disk.truncate(1024 * 1024)
        self.sh(pattern.write_command(self.disk, sudo=False))
        with open(self.disk, 'r+b') as disk:
            disk.truncate(1024 * 1024)
        mismatches = pattern.mismatches(
            self.sh(pattern.read_command(self.disk, sudo=False)))
        self.assertEqual([2560], [m.block for m in mismatches])
        self.assertIn('nothing', str(mismatches[0]))

    def test_missing_output_is_a_mismatch(self):
        pattern = helpers.GuestPattern(VOLUME)
        mismatches = pattern.mismatches('dd: /dev/vdb: No such device\n')
        self.assertEqual([None, None], [m.actual for m in mismatches])
        self.assertIn('no checksum', str(mismatches[0]))

    def test_guest_commands_use_sudo(self):
        pattern = helpers.GuestPattern(VOLUME)
        self.assertIn('| sudo dd of=/dev/vdb ', pattern.write_command(
            '/dev/vdb'))
        self.assertTrue(pattern.read_command('/dev/vdb').startswith(
            'sudo dd if=/dev/vdb '))
        self.assertTrue(helpers.drop_caches_command().startswith('sudo '))
        self.assertRaises(ValueError, pattern.write_command, 'vdb')
        self.assertRaises(ValueError, pattern.read_command, '/dev/v db')

    def test_new_guest_disk(self):
        self.assertEqual('/dev/vdb',
                         helpers.new_guest_disk(['vda'], ['vda', 'vdb']))
        self.assertEqual('/dev/sdb', helpers.new_guest_disk(
            ['sda', 'vda'], ['vda', 'sdb', 'sda']))
        self.assertRaises(helpers.GuestDiskError, helpers.new_guest_disk,
                          ['vda'], ['vda'])
        self.assertRaises(helpers.GuestDiskError, helpers.new_guest_disk,
                          ['vda'], ['vda', 'vdb', 'vdc'])
        self.assertRaises(helpers.GuestDiskError, helpers.new_guest_disk,
                          ['vda'], ['vda', '../x'])


class CasadmListTestCase(testtools.TestCase):

    def test_parse(self):
        cores = helpers.parse_casadm_list(CASADM_LIST)
        self.assertEqual(
            [(None, None, None, 'Detached', None),
             (1, 'wb', 1, 'Active', '/dev/cas1-1'),
             (1, 'wb', 2, 'Inactive', None),
             (2, 'wt', 1, 'Flushing (42.0 %)', '/dev/cas2-1')],
            [(c.cache_id, c.cache_mode, c.core_id, c.status, c.device)
             for c in cores])
        self.assertTrue(cores[0].in_core_pool)
        self.assertFalse(cores[1].in_core_pool)

    def test_no_caches(self):
        self.assertEqual([], helpers.parse_casadm_list('No caches running\n'))
        self.assertEqual([], helpers.parse_casadm_list(''))
        self.assertEqual([], helpers.parse_casadm_list(
            'type,id,disk,status,write policy,device\n'))

    def test_not_the_csv_list(self):
        table = ('type    id   disk       status    write policy   device\n'
                 'cache   1    /dev/sdb   Running   wt             -\n')
        self.assertRaises(helpers.CasadmOutputError,
                          helpers.parse_casadm_list, table)
        self.assertRaises(helpers.CasadmOutputError,
                          helpers.parse_casadm_list,
                          'type,id,disk,status,write policy,device\n'
                          'core,1,/dev/disk/by-id/x,Active,/dev/cas1-1\n')
        self.assertRaises(helpers.CasadmOutputError,
                          helpers.parse_casadm_list,
                          'type,id,disk,status,write policy,device\n'
                          'cache,one,/dev/sdb,Running,wt,-\n')
        self.assertRaises(helpers.CasadmOutputError,
                          helpers.parse_casadm_list,
                          'type,id,disk,status,write policy,device\n'
                          'volume,1,/dev/sdb,Running,wt,-\n')

    def test_core_of_volume(self):
        cores = helpers.parse_casadm_list(CASADM_LIST)
        [core] = helpers.cores_for_volume(cores, VOLUME)
        self.assertEqual((1, 'wb', 1, 'Active', '/dev/cas1-1'),
                         (core.cache_id, core.cache_mode, core.core_id,
                          core.status, core.device))

    def test_core_pool_device_is_found_too(self):
        cores = helpers.parse_casadm_list(CASADM_LIST)
        [core] = helpers.cores_for_volume(cores, OTHER)
        self.assertTrue(core.in_core_pool)

    def test_resolved_paths_and_unknown_volumes_do_not_match(self):
        cores = helpers.parse_casadm_list(CASADM_LIST)
        self.assertEqual([], helpers.cores_for_volume(
            cores, '11111111-2222-3333-4444-555555555555'))
        self.assertEqual([], helpers.cores_for_volume(cores, VOLUME[1:]))
        self.assertEqual([], helpers.cores_for_volume(cores, 'rbd3'))

    def test_is_cas_device(self):
        self.assertTrue(helpers.is_cas_device('/dev/cas1-1'))
        self.assertTrue(helpers.is_cas_device('/dev/cas16384-4095'))
        for path in (None, '', '/dev/cas1', '/dev/cas1-1p1', '/dev/rbd0',
                     '/dev/cas1-1; reboot'):
            self.assertFalse(helpers.is_cas_device(path), path)

    def test_list_command_prints_by_id_paths(self):
        self.assertEqual(['sudo', 'casadm', '--list-caches',
                          '--output-format', 'csv', '--by-id-path'],
                         helpers.CASADM_LIST_COMMAND.split())
