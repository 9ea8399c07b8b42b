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

"""casadm as it really behaves (opencas-cli.md, "Third reading")."""

from os_brick_cas import exception
from os_brick_cas import opencas_conf
from tests.functional import base


class DirtyCountDecidesTestCase(base.FunctionalTestCase):
    """Detach follows casadm's dirty count, not the instance's mode."""

    def test_wb_switched_to_wt_without_flush_is_flushed_on_detach(self):
        image = self.image('volume-switched')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 256)
        self.assertEqual(2, core.cache_id)
        self.assertIn((2, core.core_id),
                      opencas_conf.read(self.opencas_conf).cores)
        # the operator leaves write-back without flushing: the core keeps
        # its dirty blocks while the instance now reports 'wt'
        self._tool('casadm', '-Q', '-c', 'wt', '-i', '2', '-f', 'no')
        self.assertGreater(self.dirty(core), 0)

        self.connector.disconnect_volume(props, info)

        argvs = self.casadm_argvs()
        flushes = [i for i, argv in enumerate(argvs)
                   if '--flush-cache' in argv]
        removes = [i for i, argv in enumerate(argvs)
                   if '--remove-core' in argv]
        self.assertEqual(1, len(flushes), argvs)
        self.assertIn(str(core.core_id), argvs[flushes[0]])
        self.assertLess(flushes[0], removes[0])
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()


class WholeCacheFlushTestCase(base.FunctionalTestCase):
    """`-L` during a whole-cache flush: 'Flushing (NN.N %)', 'wb-><mode>'."""

    def test_attach_and_detach_while_instances_flush(self):
        self.host.set_flushing(1, 42.5)   # a wt instance: 'wb->wt'
        self.host.set_flushing(2, 7.0)    # a wb instance: 'wb->wb'
        listed = {cache.cache_id: cache for cache in self.cache_list()}
        self.assertEqual(('Flushing (42.5 %)', 'wb->wt'),
                         (listed[1].status, listed[1].mode))
        self.assertEqual('wb->wb', listed[2].mode)
        attached = {}
        for mode, cache_id in (('wt', 1), ('wb', 2)):
            image = self.image('volume-flushing-%s' % mode)
            attached[mode] = (self.props(image, mode),
                              self.connector.connect_volume(
                                  self.props(image, mode)))
            self.assertRegex(attached[mode][1]['path'],
                             r'^/dev/cas%d-\d+$' % cache_id)
        self.assertTrue(all(core.status.startswith('Flushing')
                            for core in self.cores()))
        for props, info in attached.values():
            self.connector.disconnect_volume(props, info)
        self.assertFalse([argv for argv in self.casadm_argvs()
                          if '--try-add' in argv])
        self.assert_clean_host()


class RemoveSecondFlushFailsTestCase(base.FunctionalTestCase):
    """-R whose second flush fails leaves the core Inactive and dirty."""

    def test_detach_refused_then_retried(self):
        image = self.image('volume-detached')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 64)
        self.host.fail_remove_second_flush(8)

        exc = self.assertRaises(exception.CoreRemovalFailed,
                                self.connector.disconnect_volume, props, info)
        self.assertIn('dirty data', str(exc))
        [core] = self.cores()
        self.assertEqual('Inactive', core.status, self.casadm_argvs())
        self.assertEqual(8, self.dirty(core))
        self.assertEqual('Incomplete', self.cache_list()[1].status)
        self.assertIn((2, core.core_id),
                      opencas_conf.read(self.opencas_conf).cores)
        self.assertEqual(1, len(self.mappings()))

        self.connector.disconnect_volume(props, info)
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()
