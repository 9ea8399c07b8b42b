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

"""Swap volume of an attached cached volume leaves no stale core."""

import fixtures
from nova import exception
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.api import client

from tests.nova.functional import base

OLD = nova_fixtures.CinderFixture.SWAP_OLD_VOL
NEW = nova_fixtures.CinderFixture.SWAP_NEW_VOL


class SwapVolumeTestCase(base.CachedVolumeTestBase):

    ADMIN_API = True
    volumes = {OLD: 'wb', NEW: 'wt'}

    def setUp(self):
        super().setUp()
        self.start_compute('compute1')
        self.flags(host='compute1')
        self.server = self._create_server(networks='none')

    def test_swap_write_back_for_write_through(self):
        self._attach_volume(self.server, OLD)
        [old_core] = self.cores()
        self.assertEqual(2, old_core.cache_id)
        self.host.set_dirty(old_core.cache_id, old_core.core_id, 20)

        self.admin_api.put_server_volume(self.server['id'], OLD, NEW)
        self._wait_for_volume_attach(self.server['id'], NEW)

        # only the new volume is cached; the old core was flushed to Ceph
        # and removed, its mapping, link and fence are gone
        [new_core] = self.cores()
        self.assertEqual((1, self.host.by_id_link('volumes', 'volume-' + NEW)),
                         (new_core.cache_id, new_core.device))
        self.assertEqual(['volume-' + NEW],
                         [m['name'] for m in self.mappings()])
        state = self.host.state()
        self.assertEqual(20, state['flushed_blocks'])
        # drained before the pivot: the old core was pinned to a
        # no-allocation IO class, so the block copy made nothing dirty
        self.assertTrue([call for call in self.host.calls(verb='io-class')
                         if '--load-config' in call['argv']])
        self.assertEqual(0, state['dropped_dirty_blocks'])
        self.assertEqual({}, self.cinder.fences)
        # what nova stored for the guest (nova's fake domain does not
        # apply the block copy to its XML, so that cannot be read back)
        self.assertEqual(new_core.exported,
                         self.stored_device_path(self.server, NEW))

    def test_failed_flush_aborts_the_swap_before_the_guest_moves(self):
        """Issue 13 (f): the flush used to fail after the pivot."""
        self._attach_volume(self.server, OLD)
        [old_core] = self.cores()
        self.host.set_dirty(old_core.cache_id, old_core.core_id, 20)
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core device\n')
        # cast-as-call in the fixtures: the failure surfaces at the API
        self.assertRaises(client.OpenStackApiException,
                          self.admin_api.put_server_volume,
                          self.server['id'], OLD, NEW)
        # the guest never left the old volume: its core and data stay and
        # the new volume was never connected here
        [kept] = self.cores()
        self.assertEqual((old_core.cache_id, old_core.core_id, 20),
                         (kept.cache_id, kept.core_id,
                          self.host.state()['caches'][str(kept.cache_id)][
                              'cores'][str(kept.core_id)]['dirty']))
        self.assertEqual(['volume-' + OLD],
                         [m['name'] for m in self.mappings()])
        self.assertEqual([], self.host.calls(verb='map')[1:])
        self.assertEqual(old_core.exported,
                         self.stored_device_path(self.server, OLD))
        self.assertEqual({OLD: 'compute1'}, self.cinder.fences)

    def test_swap_aborted_after_its_drain_caches_writes_again(self):
        """Issue 21: a swap that fails after the drain left it drained."""
        self._attach_volume(self.server, OLD)
        [old_core] = self.cores()
        self.host.set_dirty(old_core.cache_id, old_core.core_id, 20)

        def block_copy_fails(*args, **kwargs):
            raise exception.VolumeRebaseFailed(reason='block job failed')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._swap_volume',
            block_copy_fails))
        self.assertRaises(client.OpenStackApiException,
                          self.admin_api.put_server_volume,
                          self.server['id'], OLD, NEW)
        self._run_periodics()
        [kept] = self.cores()
        self.assertEqual((old_core.cache_id, old_core.core_id),
                         (kept.cache_id, kept.core_id))
        # the guest stays on the old volume: it caches writes again and
        # Cinder names this host, not drained
        self.assertEqual(set(), self.drained_on('compute1'))
        self.assertEqual({OLD: 'compute1'}, self.cinder.fences)
        self.assertEqual({}, self.cinder.drained)

    def test_failed_detach_after_the_pivot_keeps_old_data_and_the_swap(self):
        self._attach_volume(self.server, OLD)
        [old_core] = self.cores()
        self.host.set_dirty(old_core.cache_id, old_core.core_id, 20)
        # the flush before the pivot works; the removal after it does not
        self.host.inject_fault('remove-core', exit_code=1, stderr=(
            'Error while removing core device %d from cache instance %d\n'
            'Device opens or mount are pending to this cache\n' % (
                old_core.core_id, old_core.cache_id)), count=7)
        self.admin_api.put_server_volume(self.server['id'], OLD, NEW)
        self._wait_for_volume_attach(self.server['id'], NEW)
        self.assertTrue(self.stored_device_path(
            self.server, NEW).startswith('/dev/cas1-'))
        # the old core is still here, its marker too (see the runbook)
        self.assertIn((old_core.cache_id, old_core.core_id),
                      [(c.cache_id, c.core_id) for c in self.cores()])
        self.assertEqual(20, self.host.state()['flushed_blocks'])
        self.assertEqual('compute1', self.cinder.fences.get(OLD))
