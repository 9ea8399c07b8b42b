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

"""Only the attachment that cached a volume's data uses or flushes it.

``cas_epoch`` is the caller's attachment, ``cas_owner_epoch`` the one
Cinder's fence marker names as owner on this host ('' = none here).
"""

from os_brick_cas import casadm
from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
from os_brick_cas import ownership
from os_brick_cas import report
from tests.functional import base

EPOCH_A = 'a0a0a0a0-0000-4000-8000-00000000000a'
EPOCH_B = 'b0b0b0b0-0000-4000-8000-00000000000b'


class OwnershipTestCase(base.FunctionalTestCase):

    def attach(self, image: str, mode: str, epoch: str,
               owner: object = None):
        props = self.props(image, mode, cas_epoch=epoch)
        if owner is not None:
            props['cas_owner_epoch'] = owner
        return props, self.connector.connect_volume(props)

    def test_clean_core_of_an_earlier_attachment_is_never_reused(self):
        """Issue 13 (d): a wt core left by a crash served old lines."""
        image = self.image('volume-wt-epochs')
        self.attach(image, 'wt', EPOCH_A)
        [old] = self.cores()
        self.assertEqual(EPOCH_A, ownership.read(old.device).epoch)
        # status shows it
        core_report = report.find_volume_core(
            report.host_report(casadm.Casadm()), 'volumes/' + image)
        self.assertEqual(EPOCH_A, core_report.attachment)
        self.host.reboot()                       # core left inactive
        props, info = self.attach(image, 'wt', EPOCH_B)
        [new] = self.cores()
        self.assertTrue(new.active)
        self.assertEqual([], self.host.calls(verb='try-add'))
        self.assertEqual(1, len(self.host.calls(verb='remove-inactive')))
        self.assertEqual(EPOCH_B, ownership.read(new.device).epoch)
        self.connector.disconnect_volume(props, info)
        self.assertIsNone(ownership.read(new.device))
        self.assert_clean_host()

    def test_same_attachment_reuses_its_core(self):
        """A hard reboot reconnects the same attachment: try-add."""
        image = self.image('volume-wt-same')
        self.attach(image, 'wt', EPOCH_A)
        [old] = self.cores()
        self.host.reboot()
        props, info = self.attach(image, 'wt', EPOCH_A)
        [again] = self.cores()
        self.assertEqual((old.cache_id, old.core_id, True),
                         (again.cache_id, again.core_id, again.active))
        self.assertEqual(1, len(self.host.calls(verb='try-add')))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def dirty_core_after_reboot(self, image: str):
        self.attach(image, 'wb', EPOCH_A, owner='')
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 32)
        self.host.reboot()
        return core

    def test_dirty_core_of_a_non_owner_is_neither_reused_nor_flushed(self):
        image = self.image('volume-wb-stale')
        core = self.dirty_core_after_reboot(image)
        props = self.props(image, 'wb', cas_epoch=EPOCH_B,
                           cas_owner_epoch='')
        maps = len(self.host.calls(verb='map'))
        exc = self.assertRaises(exception.NotDataOwner,
                                self.connector.connect_volume, props)
        self.assertIn('32 dirty blocks of attachment %s' % EPOCH_A, str(exc))
        # refused before mapping: Open CAS's udev loader would re-activate
        # the core (and clean its stale data) as soon as the link appeared
        self.assertEqual(maps, len(self.host.calls(verb='map')))
        self.assertEqual([], self.mappings())
        exc = self.assertRaises(exception.NotDataOwner,
                                self.connector.disconnect_volume, props,
                                None)
        self.assertIn('another host or no host', str(exc))
        [kept] = self.cores()
        self.assertEqual((core.cache_id, core.core_id, False, 32),
                         (kept.cache_id, kept.core_id, kept.active,
                          self.dirty(kept)))
        self.assertEqual([], self.host.calls(verb='try-add'))
        self.assertEqual([], self.host.calls(verb='flush-core'))
        self.assertEqual([], self.mappings())
        self.assertTrue(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id, core.device))

    def test_owner_attachment_continues_with_its_dirty_core(self):
        image = self.image('volume-wb-owner')
        core = self.dirty_core_after_reboot(image)
        props, info = self.attach(image, 'wb', EPOCH_B, owner=EPOCH_A)
        [again] = self.cores()
        self.assertEqual((core.cache_id, core.core_id, True, 32),
                         (again.cache_id, again.core_id, again.active,
                          self.dirty(again)))
        # the new attachment owns the core now
        self.assertEqual(EPOCH_B, ownership.read(again.device).epoch)
        props['cas_owner_epoch'] = EPOCH_B
        self.connector.disconnect_volume(props, info)
        self.assertEqual(32, self.host.state()['flushed_blocks'])
        self.assert_clean_host()

    def test_udev_loader_never_sees_a_link_for_a_stale_core(self):
        """Mapping would let Open CAS's loader re-add and clean the core."""
        image = self.image('volume-wb-loader')
        core = self.dirty_core_after_reboot(image)
        self.host.set_udev_loader(True)
        props = self.props(image, 'wb', cas_epoch=EPOCH_B,
                           cas_owner_epoch='')
        self.assertRaises(exception.NotDataOwner,
                          self.connector.connect_volume, props)
        [kept] = self.cores()
        self.assertEqual((core.core_id, False, 32),
                         (kept.core_id, kept.active, self.dirty(kept)))
        self.assertEqual([], self.host.state().get('loader_added', []))
        self.assertEqual(0, self.host.state()['flushed_blocks'])
