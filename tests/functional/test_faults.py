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

"""Fault-injection matrix: every step of attach and detach failing.

Each case asserts the exception type and message, that nothing leaked
(attach) or nothing was dropped (detach: core, dirty data, mapping and
opencas.conf row stay), and that a retry after the fault clears succeeds.
"""

import contextlib
import os
import subprocess

import ddt
from oslo_concurrency import processutils

from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
from tests.functional import base

MODULE_GONE = dict(exit_code=1, stdout='Is the kernel module loaded?\n',
                   stderr='Device /dev/cas_ctrl not found\n')

ATTACH_FAULTS = {
    'map': ('map', dict(exit_code=2, stderr='rbd: sysfs write failed\n'
                                            'rbd: map failed: (5) '
                                            'Input/output error\n'),
            processutils.ProcessExecutionError, 'rbd'),
    'list-module-unloaded': ('list-caches', MODULE_GONE,
                             exception.CasModuleNotLoaded, 'modprobe'),
    'add-core-already-cached': (
        'add-core', dict(exit_code=1, stderr="Core device "
                         "'/dev/disk/by-id/x' is already cached.\n"),
        exception.CoreAlreadyCached, 'already a core'),
    'add-core-exclusive': (
        'add-core', dict(exit_code=1, stderr="Failed to open "
                         "'/dev/disk/by-id/x' device exclusively. Please "
                         "close all applications accessing it or unmount "
                         "the device.\n"),
        exception.DeviceBusy, 'is busy'),
    'add-core-no-cache': (
        'add-core', dict(exit_code=1, stderr='Error while adding core device '
                         'to cache instance 2\nCache ID does not exist\n'),
        exception.CacheNotFound, 'does not exist'),
    'add-core-other': (
        'add-core', dict(exit_code=1, stderr='Error while adding core device '
                         'to cache instance 2\nCore device not available\n'),
        exception.CasadmCommandFailed, 'Core device not available'),
}

DETACH_FAULTS = {
    # opencas.conf lists the wb volume: its cache may hold newer data
    'list-module-unloaded': ('list-caches', MODULE_GONE,
                             exception.CachedDataMayBeNewer, 'modprobe'),
    'flush-fails': ('flush-core', dict(exit_code=1, stderr='Error while '
                                       'flushing core 1 of cache 2\n'
                                       'Core device not available\n'),
                    exception.FlushFailed, 'left in place'),
    'flush-interrupted': ('flush-core', dict(exit_code=2, stderr='Flushing '
                                             'of core interrupted\n'),
                          exception.FlushFailed, 'left in place'),
    # refused on every retry (casadm.REMOVE_ATTEMPTS): the disk stays open
    'remove-busy': ('remove-core', dict(exit_code=1, stderr='Error while '
                                        'removing core device 1 from cache '
                                        'instance 2\nDevice opens or mount '
                                        'are pending to this cache\n',
                                        count=7),
                    exception.DeviceBusy, 'detached first'),
    'showmapped': ('showmapped', dict(exit_code=1, stderr='rbd: error\n'),
                   processutils.ProcessExecutionError, 'rbd'),
    'unmap': ('unmap', dict(exit_code=16, stderr='rbd: sysfs write failed\n'
                                                 'rbd: unmap failed: (16) '
                                                 'Device or resource busy\n'),
              processutils.ProcessExecutionError, 'rbd'),
}


@ddt.ddt
class AttachFaultTestCase(base.FunctionalTestCase):

    @ddt.data(*sorted(ATTACH_FAULTS))
    def test_attach_step_fails(self, name):
        verb, fault, error, message = ATTACH_FAULTS[name]
        image = self.image('volume-af-%s' % name)
        self.host.inject_fault(verb, **fault)
        exc = self.assertRaises(error, self.connector.connect_volume,
                                self.props(image, 'wb'))
        self.assertIn(message, str(exc) + str(getattr(exc, 'stderr', '')))
        self.assert_clean_host()
        # the fault was one-shot: the same attach now works
        info = self.connector.connect_volume(self.props(image, 'wb'))
        self.assertEqual(1, len(self.cores()))
        self.connector.disconnect_volume(self.props(image, 'wb'), info)
        self.assert_clean_host()

    def test_opencas_conf_write_fails(self):
        image = self.image('volume-af-conf')
        with read_only(os.path.dirname(self.opencas_conf)):
            self.assertRaises(OSError, self.connector.connect_volume,
                              self.props(image, 'wb'))
            self.assertEqual([], self.cores())
        self.assert_clean_host()

    def test_rollback_keeps_a_mapping_it_did_not_make(self):
        image = self.image('volume-af-premapped')
        subprocess.run(['rbd', 'map', image, '--pool', base.POOL],
                       check=True, capture_output=True)
        self.host.inject_fault('add-core', exit_code=1,
                               stderr='Error while adding core device to '
                                      'cache instance 1\nTry again\n',
                               count=4)
        self.assertRaises(exception.CasadmBusy, self.connector.connect_volume,
                          self.props(image, 'wt'))
        self.assertEqual([image], [m['name'] for m in self.mappings()])
        self.assertEqual([], self.cores())

    def test_bad_connection_info_runs_nothing(self):
        for props in ({'name': '../v', 'cacheable': True},
                      {'name': './v', 'cacheable': True},
                      {'name': 'volumes/..', 'cacheable': True},
                      {'name': 'volumes/.hidden', 'cacheable': True},
                      {'name': 'volumes/v\n', 'cacheable': True},
                      {'name': 'volumes/-x', 'cacheable': True},
                      {'name': 'volumes/v\x00', 'cacheable': True},
                      {'name': 'volumes/ns/v/x', 'cacheable': True},
                      {'name': 'volumes/v', 'cacheable': True,
                       'cluster_fsid': 'not-a-uuid\n'},
                      {'name': 'volumes/v', 'cacheable': True,
                       'cache_mode': 'write-back'},
                      {'name': 'volumes', 'cacheable': True},
                      {'name': 'volumes/v', 'cacheable': 'maybe'}):
            self.assertRaises(exception.InvalidConnectionInfo,
                              self.connector.connect_volume, props)
            self.assertRaises(exception.InvalidConnectionInfo,
                              self.connector.disconnect_volume, props, None)
        self.assertEqual([], self.host.calls())


@ddt.ddt
class DetachFaultTestCase(base.FunctionalTestCase):

    def attach_dirty(self, name: str, dirty: int = 128):
        image = self.image('volume-df-%s' % name)
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return props, info, core

    def assert_nothing_dropped(self, core, dirty: int) -> None:
        [kept] = self.cores()
        self.assertEqual((core.cache_id, core.core_id), (kept.cache_id,
                                                         kept.core_id))
        self.assertEqual(dirty, self.dirty(kept))
        self.assertEqual(1, len(self.mappings()))
        self.assertTrue(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id))

    @ddt.data('list-module-unloaded', 'flush-fails', 'flush-interrupted')
    def test_detach_fails_before_removal(self, name):
        verb, fault, error, message = DETACH_FAULTS[name]
        props, info, core = self.attach_dirty(name)
        self.host.inject_fault(verb, **fault)
        exc = self.assertRaises(error, self.connector.disconnect_volume,
                                props, info)
        self.assertIn(message, str(exc))
        self.assert_nothing_dropped(core, 128)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_flush_timeout_leaves_everything(self):
        self.conf.config(group='os_brick_cas', flush_timeout=1)
        props, info, core = self.attach_dirty('timeout')
        self.host.inject_fault('flush-core', hang=30)
        exc = self.assertRaises(exception.FlushTimedOut,
                                self.connector.disconnect_volume, props, info)
        self.assertIn('within 1 s', str(exc))
        self.assert_nothing_dropped(core, 128)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_remove_busy_keeps_core_and_mapping(self):
        verb, fault, error, message = DETACH_FAULTS['remove-busy']
        props, info, core = self.attach_dirty('busy')
        self.host.inject_fault(verb, **fault)
        exc = self.assertRaises(error, self.connector.disconnect_volume,
                                props, info)
        self.assertIn(message, str(exc))
        # the flush before the removal ran: data is in Ceph, core still here
        self.assert_nothing_dropped(core, 0)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_remove_core_fails(self):
        props, info, core = self.attach_dirty('remove-fails')
        self.host.inject_fault('remove-core', exit_code=1,
                               stderr='Failed to remove core. See dmesg for '
                                      'more information\n')
        exc = self.assertRaises(exception.CoreRemovalFailed,
                                self.connector.disconnect_volume, props, info)
        self.assertIn('Failed to remove core', str(exc))
        self.assert_nothing_dropped(core, 0)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_inactive_dirty_core_with_device_back_is_flushed(self):
        self.host.set_udev_by_id(True)
        props, info, core = self.attach_dirty('inactive-back', dirty=32)
        self.host.reboot()
        # the image is mapped again by someone else (udev links it) but the
        # core was not re-activated: detach must re-activate and flush it
        subprocess.run(['rbd', 'map', props['name'].split('/')[1],
                        '--pool', base.POOL], check=True,
                       capture_output=True)
        [inactive] = self.cores()
        self.assertFalse(inactive.active)
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
        verbs = [argv for argv in self.casadm_argvs()
                 if '--try-add' in argv or '--flush-cache' in argv]
        self.assertTrue(any('--try-add' in argv for argv in verbs))
        self.assertTrue(any('--flush-cache' in argv for argv in verbs))

    @ddt.data('unmap')
    def test_unmap_step_fails_after_core_removed(self, name):
        verb, fault, error, message = DETACH_FAULTS[name]
        props, info, core = self.attach_dirty(name)
        self.host.inject_fault(verb, **fault)
        self.assertRaises(error, self.connector.disconnect_volume, props,
                          info)
        self.assertEqual([], self.cores())  # flushed, then removed
        self.assertEqual(1, len(self.mappings()))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_opencas_conf_update_fails_after_removal(self):
        props, info, core = self.attach_dirty('conf')
        with read_only(os.path.dirname(self.opencas_conf)):
            self.assertRaises(OSError, self.connector.disconnect_volume,
                              props, info)
        self.assertEqual([], self.cores())
        self.assertEqual(1, len(self.mappings()))
        # the stale row is dropped by the retry
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()


@contextlib.contextmanager
def read_only(directory: str):
    """Bind-mount *directory* read-only over itself (a real EROFS)."""
    subprocess.run(['mount', '--bind', directory, directory], check=True)
    try:
        subprocess.run(['mount', '-o', 'remount,bind,ro', directory],
                       check=True)
        yield
    finally:
        subprocess.run(['umount', directory], check=True)
