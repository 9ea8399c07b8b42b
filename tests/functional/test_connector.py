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

"""Attach/detach of cached RBD volumes on the simulated host."""

import os

import ddt
from os_brick import exception as brick_exception


from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import opencas_conf
from tests.functional import base

PATTERN = b'os-brick-cas\x00' * 315 + b'!'  # 4096 bytes


def write_at(path: str, offset: int, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_at(path: str, offset: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


@ddt.ddt
class AttachDetachTestCase(base.FunctionalTestCase):

    @ddt.data(*sorted(base.MODES.items()))
    @ddt.unpack
    def test_attach_detach_each_mode(self, cache_id, mode):
        image = self.image('volume-%s' % mode)
        info = self.connector.connect_volume(self.props(image, mode))
        self.assertEqual('block', info['type'])
        self.assertRegex(info['path'], r'^/dev/cas%d-\d+$' % cache_id)
        self.assertEqual(mode, info['cache_mode'])
        [core] = self.cores()
        link = self.link(image)
        self.assertEqual((cache_id, link, True, info['path']),
                         (core.cache_id, core.device, core.active,
                          core.exported))
        [mapping] = self.mappings()
        self.assertEqual((base.POOL, image), (mapping['pool'],
                                              mapping['name']))
        self.assertEqual(os.path.realpath(link),
                         os.path.realpath(mapping['device']))
        # bytes written to the exported device reach the krbd device
        write_at(info['path'], 8192, PATTERN)
        self.assertEqual(PATTERN, read_at(mapping['device'], 8192,
                                          len(PATTERN)))
        listed = opencas_conf.read(self.opencas_conf)
        self.assertEqual(mode in ('wb', 'wo'),
                         listed.lists_core(cache_id, core.core_id, link))
        self.connector.disconnect_volume(self.props(image, mode), info)
        self.assert_clean_host()

    def test_attach_twice_returns_same_device(self):
        image = self.image('volume-twice')
        first = self.connector.connect_volume(self.props(image, 'wb'))
        second = self.connector.connect_volume(self.props(image, 'wb'))
        self.assertEqual(first['path'], second['path'])
        self.assertEqual(1, len(self.cores()))
        self.assertEqual(1, len(self.mappings()))
        self.connector.disconnect_volume(self.props(image, 'wb'), first)
        self.assert_clean_host()

    def test_attach_returns_after_udev_settled_on_new_devices(self):
        # udev's probe of a new /dev/rbdN and /dev/casX-Y (blkid, Open
        # CAS's loader) raced the first writes on the real kernel
        image = self.image('volume-settle')
        self.connector.connect_volume(self.props(image, 'wb'))
        order = [(call['tool'], call['verb']) for call in self.host.calls()
                 if call['tool'] in ('rbd', 'udevadm') or
                 call['verb'] == 'add-core']
        self.assertEqual([('rbd', 'map'), ('udevadm', 'settle'),
                          ('casadm', 'add-core'), ('udevadm', 'settle')],
                         [step for step in order
                          if step != ('rbd', 'showmapped')])
        # attached again as it is: no device was made, nothing to wait for
        mark = len(self.host.calls())
        self.connector.connect_volume(self.props(image, 'wb'))
        self.assertEqual([], [call for call in self.host.calls()[mark:]
                              if call['tool'] == 'udevadm'])
        self.connector.disconnect_volume(self.props(image, 'wb'), None)
        self.assert_clean_host()

    def test_a_settle_timeout_of_zero_skips_the_wait(self):
        self.conf.config(group='os_brick_cas', udev_settle_timeout=0)
        image = self.image('volume-nosettle')
        self.connector.connect_volume(self.props(image, 'wt'))
        self.assertEqual([], [call for call in self.host.calls()
                              if call['tool'] == 'udevadm'])
        self.assertEqual(1, len(self.cores()))
        self.connector.disconnect_volume(self.props(image, 'wt'), None)
        self.assert_clean_host()

    def test_detach_of_gone_volume_succeeds(self):
        image = self.image('volume-gone')
        self.connector.disconnect_volume(self.props(image, 'wb'), None)
        self.assert_clean_host()
        self.assertFalse([argv for argv in self.casadm_argvs()
                          if '--remove-core' in argv])

    def test_uncacheable_volume_is_plain_krbd(self):
        image = self.image('volume-plain')
        info = self.connector.connect_volume(self.props(image, None))
        self.assertEqual('/dev/rbd/volumes/%s' % image, info['path'])
        self.assertEqual([], self.cores())
        self.connector.disconnect_volume(self.props(image, None), info)
        self.assert_clean_host()

    def test_get_volume_paths(self):
        image = self.image('volume-paths')
        props = self.props(image, 'wt')
        self.assertEqual([], self.connector.get_volume_paths(props))
        info = self.connector.connect_volume(props)
        self.assertEqual([info['path']],
                         self.connector.get_volume_paths(props))
        self.connector.disconnect_volume(props, info)

    def test_extend_refused_with_advice_only_while_cached(self):
        props = self.props(self.image('volume-ext'), 'wt')
        # not attached here: os-brick's own answer, no casadm refusal
        exc = self.assertRaises(brick_exception.BrickException,
                                self.connector.extend_volume, props)
        self.assertNotIsInstance(exc, exception.CasError)
        info = self.connector.connect_volume(props)
        exc = self.assertRaises(exception.CasError,
                                self.connector.extend_volume, props)
        self.assertIn('Detach the volume, extend it', str(exc))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_write_back_dirty_data_is_flushed_on_detach(self):
        image = self.image('volume-dirty')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 256)
        self.assertEqual(256, self.dirty(core))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
        flushed = [argv for argv in self.casadm_argvs()
                   if '--flush-cache' in argv]
        self.assertEqual(1, len(flushed))
        self.assertIn(str(core.core_id), flushed[0])

    def test_no_call_ever_forces(self):
        image = self.image('volume-force')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 8)
        self.connector.disconnect_volume(props, info)
        for argv in self.casadm_argvs():
            self.assertFalse({'-f', '--force', '-n', '--no-data-flush'} &
                             set(argv), argv)

    def test_fallback_to_clean_mode(self):
        self.conf.config(group='os_brick_cas', fallback_policy='clean-mode',
                         cache_instances={'wt': '1'})
        image = self.image('volume-fallback')
        info = self.connector.connect_volume(self.props(image, 'wb'))
        self.assertEqual('wt', info['cache_mode'])
        self.assertEqual([1], [c.cache_id for c in self.cores()])
        self.connector.disconnect_volume(self.props(image, 'wb'), info)
        self.assert_clean_host()

    def test_no_instance_for_mode_fails_cleanly(self):
        self.conf.config(group='os_brick_cas', cache_instances={'wt': '1'})
        image = self.image('volume-nomode')
        exc = self.assertRaises(exception.NoCacheForMode,
                                self.connector.connect_volume,
                                self.props(image, 'wb'))
        self.assertIn('fallback_policy', str(exc))
        self.assert_clean_host()

    def test_mode_mismatch_names_instances(self):
        self.conf.config(group='os_brick_cas',
                         cache_instances={'wb': '1', 'wt': '2'})
        image = self.image('volume-mismatch')
        exc = self.assertRaises(exception.CacheModeMismatch,
                                self.connector.connect_volume,
                                self.props(image, 'wb'))
        self.assertIn('1=wt', str(exc))
        self.assert_clean_host()

    def test_udev_link_is_used_as_is(self):
        self.host.set_udev_by_id(True)
        image = self.image('volume-udev')
        info = self.connector.connect_volume(self.props(image, 'wt'))
        self.assertEqual([os.path.basename(self.link(image))],
                         self.by_id_links())
        self.connector.disconnect_volume(self.props(image, 'wt'), info)
        self.assert_clean_host()


class ReattachAfterRebootTestCase(base.FunctionalTestCase):

    def test_inactive_core_is_reactivated_with_its_dirty_data(self):
        image = self.image('volume-reboot')
        props = self.props(image, 'wb')
        self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 64)
        self.host.reboot()
        self.assertEqual([], self.mappings())
        [inactive] = self.cores()
        self.assertEqual((core.cache_id, core.core_id, False),
                         (inactive.cache_id, inactive.core_id,
                          inactive.active))
        self.assertEqual(64, self.dirty(inactive))
        info = self.connector.connect_volume(props)
        [again] = self.cores()
        self.assertEqual((core.cache_id, core.core_id, True, 64),
                         (again.cache_id, again.core_id, again.active,
                          self.dirty(again)))
        self.assertEqual(core.exported, info['path'])
        self.assertTrue([argv for argv in self.casadm_argvs()
                         if '--try-add' in argv])
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def stranded_write_back_core(self) -> tuple[dict, casadm_output.Core]:
        """A wb volume with 5 dirty blocks whose host rebooted under it."""
        props = self.props(self.image('volume-stranded'), 'wb')
        self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 5)
        self.host.reboot()
        return props, core

    def test_detach_after_reboot_without_reattach_flushes_first(self):
        props, core = self.stranded_write_back_core()
        # the detach maps the volume so the inactive core can be
        # re-activated and its dirty data flushed before it is removed
        self.connector.disconnect_volume(props, None)
        self.assertEqual(1, len(self.host.calls(verb='try-add')))
        self.assertEqual(5, self.host.state()['flushed_blocks'])
        self.assertFalse(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id))
        self.assert_clean_host()

    def test_detach_after_reboot_keeps_dirty_core_if_volume_cannot_map(self):
        props, core = self.stranded_write_back_core()
        self.host.inject_fault('map', exit_code=110, stderr=(
            'rbd: sysfs write failed\nrbd: map failed: (110) Connection '
            'timed out\n'))
        exc = self.assertRaises(exception.InactiveCoreDeviceMissing,
                                self.connector.disconnect_volume, props, None)
        self.assertIn('attach the volume again', str(exc))
        self.assertIn('5 dirty', str(exc))
        [kept] = self.cores()
        self.assertFalse(kept.active)
        self.assertEqual(5, self.dirty(kept))
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assertTrue(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id))
        # once Ceph is reachable again the detach completes, data flushed
        self.connector.disconnect_volume(props, None)
        self.assertEqual(5, self.host.state()['flushed_blocks'])
        self.assert_clean_host()

    def test_write_through_core_is_reactivated_after_reboot(self):
        # a loaded cache keeps every core in its metadata, whatever the mode
        image = self.image('volume-wt-reboot')
        props = self.props(image, 'wt')
        first = self.connector.connect_volume(props)
        self.host.reboot()
        [inactive] = self.cores()
        self.assertFalse(inactive.active)
        info = self.connector.connect_volume(props)
        self.assertEqual(first['path'], info['path'])
        self.assertEqual(1, len(self.cores()))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_detach_of_clean_inactive_core_after_reboot(self):
        image = self.image('volume-wt-gone')
        props = self.props(image, 'wt')
        self.connector.connect_volume(props)
        self.host.reboot()
        self.connector.disconnect_volume(props, None)
        self.assert_clean_host()
        self.assertTrue(self.host.calls(verb='remove-inactive'))


class NonPersistentWriteBackTestCase(base.FunctionalTestCase):
    persistent_caches = [1]

    def test_write_back_refused_when_instance_not_in_opencas_conf(self):
        image = self.image('volume-nonpersistent')
        exc = self.assertRaises(exception.CacheNotRunning,
                                self.connector.connect_volume,
                                self.props(image, 'wb'))
        self.assertIn('[caches]', str(exc))
        self.assert_clean_host()
