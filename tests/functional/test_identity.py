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

"""Issue 12, identity: a host artifact names exactly one image.

Each test reproduces a case seen on os-brick-cas 1.x (names in the
docstrings) against the simulated host, whose stand-in rbd publishes
krbd's sysfs attributes as the kernel does.
"""

import glob
import os
import tempfile

from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
from os_brick_cas.privileged import devices as priv_devices
from tests.functional import base

#: os-brick's ceph.conf files with a keyring (mkstemp, so under TMPDIR)
BRICKRBD_FILES = os.path.join(tempfile.gettempdir(), 'brickrbd_*')


class IdentityTestCase(base.FunctionalTestCase):
    caches = {1: 'wt', 2: 'wb'}

    def props_of(self, pool, image, mode='wb', **extra):
        props = self.props(image, mode, **extra)
        props.update(name='%s/%s' % (pool, image),
                     volume_id='%s-%s' % (pool, image))
        return props

    def test_colliding_legacy_names_keep_their_own_cores(self):
        """1.x: pool a-b/image c and pool a/image b-c shared one link."""
        self.host.create_image('a-b', 'c')
        self.host.create_image('a', 'b-c')
        first = self.props_of('a-b', 'c')
        self.connector.connect_volume(first)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 64)
        self.host.reboot()
        second = self.props_of('a', 'b-c')
        info = self.connector.connect_volume(second)
        cores = {c.device: c for c in self.cores()}
        self.assertEqual(2, len(cores))
        mine = cores[self.link('b-c', pool='a')]
        self.assertTrue(mine.active)
        self.assertEqual(info['path'], mine.exported)
        theirs = cores[core.device]
        self.assertFalse(theirs.active)        # still waiting for a-b/c
        self.connector.disconnect_volume(second, info)
        self.assertEqual([core.device], [c.device for c in self.cores()])
        self.assertEqual(64, self.host.state()['caches']['2']['cores'][
            str(core.core_id)]['dirty'])
        self.assertTrue(opencas_conf.read(self.opencas_conf).lists_core(
            core.cache_id, core.core_id, core.device))
        # the right image comes back: its own data is flushed, host clean
        self.connector.disconnect_volume(first, None)
        self.assert_clean_host()

    def test_stale_link_to_a_reused_device_number_is_never_tried(self):
        """1.x: detach try-added X's dirty core through Y's device."""
        self.host.create_image('volumes', 'x')
        self.host.create_image('volumes', 'y')
        x = self.props_of('volumes', 'x')
        self.connector.connect_volume(x)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 32)
        self.host.reboot()
        y = self.props_of('volumes', 'y', mode=None)
        y_info = self.connector.connect_volume(y)     # takes /dev/rbd0
        os.symlink(os.path.relpath(os.path.realpath(y_info['path']),
                                   '/dev/disk/by-id'),
                   core.device)                       # X's old link -> Y
        self.connector.disconnect_volume(x, None)
        try_adds = [c for c in self.host.calls('casadm', 'try-add')]
        maps = [c for c in self.host.calls('rbd', 'map')
                if 'x' in c['argv']]
        self.assertEqual(1, len(try_adds))
        # X was mapped again before its core was re-activated
        self.assertLess(maps[-1]['time'], try_adds[0]['time'])
        self.assertEqual([], self.cores())
        self.assertEqual(['y'], [m['name'] for m in self.mappings()])
        self.connector.disconnect_volume(y, y_info)
        self.assert_clean_host()

    def test_same_image_name_in_two_pools_unmaps_the_right_one(self):
        """1.x: detaching volumes-ssd/X unmapped volumes/X."""
        self.host.create_image('volumes', 'same')
        self.host.create_image('volumes-ssd', 'same')
        plain = self.props_of('volumes', 'same', mode=None)
        ssd = self.props_of('volumes-ssd', 'same', mode='wt')
        self.connector.connect_volume(plain)
        info = self.connector.connect_volume(ssd)
        self.connector.disconnect_volume(ssd, info)
        self.assertEqual([('volumes', 'same')],
                         [(m['pool'], m['name']) for m in self.mappings()])
        self.connector.disconnect_volume(plain, None)
        self.assertEqual([], self.mappings())

    def test_privileged_links_only_name_their_own_image(self):
        """1.x: link_by_id/unlink_by_id took any by-id name and target."""
        self.host.create_image('volumes', 'p')
        self.host.create_image('volumes', 'q')
        p = self.props_of('volumes', 'p', mode=None)
        q = self.props_of('volumes', 'q', mode=None)
        p_dev = os.path.realpath(self.connector.connect_volume(p)['path'])
        self.connector.connect_volume(q)
        for link, target in (
                ('/dev/disk/by-id/ata-SSD_1', p_dev),
                (self.link('q'), p_dev),              # another image
                (self.link('p'), '/dev/sda'),
                (self.link('p'), p_dev + '\n'),
                ('/dev/disk/by-id/rbd-volumes-p', p_dev)):   # 1.x name
            self.assertRaises(exception.InvalidInput,
                              priv_devices.link_by_id, link, target)
        self.assertRaises(exception.InvalidInput, priv_devices.unlink_by_id,
                          '/dev/disk/by-id/nvme-boot-disk')
        self.assertEqual([], self.by_id_links())
        priv_devices.link_by_id(self.link('p'), p_dev)
        self.assertEqual([os.path.basename(self.link('p'))],
                         self.by_id_links())
        os.unlink(self.link('p'))
        self.connector.disconnect_volume(p, None)
        self.connector.disconnect_volume(q, None)

    def test_namespaces_are_part_of_the_identity(self):
        self.host.create_image('volumes', 'ns1/img')
        self.host.create_image('volumes', 'img')
        ns = self.props_of('volumes', 'img', mode='wt')
        ns['name'] = 'volumes/ns1/img'
        plain = self.props_of('volumes', 'img', mode='wt')
        ns_info = self.connector.connect_volume(ns)
        plain_info = self.connector.connect_volume(plain)
        self.assertNotEqual(ns_info['path'], plain_info['path'])
        self.assertEqual(
            sorted([self.link('img'), self.host.by_id_link(
                'volumes', 'img', namespace='ns1')]),
            sorted(c.device for c in self.cores()))
        self.connector.disconnect_volume(ns, ns_info)
        self.assertEqual([('', 'img')], [(m['namespace'], m['name'])
                                         for m in self.mappings()])
        self.connector.disconnect_volume(plain, plain_info)
        self.assert_clean_host()


class NonCacheableParityTestCase(base.FunctionalTestCase):
    """Volumes that are not cacheable never need casadm (as os-brick)."""

    def test_plain_volume_needs_no_casadm(self):
        self.host.set_module_loaded(False)
        props = self.props(self.image('volume-plain'), mode=None)
        self.connector.connect_volume(props)
        self.assertEqual([], self.connector.get_volume_paths(props))
        self.connector.disconnect_volume(props, None)
        self.assertEqual([], self.mappings())
        self.assertEqual([], self.host.calls('casadm'))

    def test_cacheable_volume_detaches_on_a_host_without_open_cas(self):
        """1.x: a cacheable volume attached via librbd could not detach."""
        self.host.set_module_loaded(False)
        props = self.props(self.image('volume-fellback'), 'wt')
        self.connector.disconnect_volume(props, None)
        self.assertEqual([], self.connector.get_volume_paths(props))

    def test_keyring_conf_is_removed(self):
        """1.x: /tmp/brickrbd_* with the keyring stayed forever."""
        before = set(glob.glob(BRICKRBD_FILES))
        props = self.props(self.image('volume-keyring'), 'wt',
                           keyring='AQBsecretkeyring==')
        info = self.connector.connect_volume(props)
        self.assertEqual(before, set(glob.glob(BRICKRBD_FILES)))
        self.connector.disconnect_volume(props, info)
        self.assertEqual(before, set(glob.glob(BRICKRBD_FILES)))
        self.assert_clean_host()
