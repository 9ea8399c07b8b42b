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

"""Attach and detach through the real connector, krbd and cas_cache."""

import os

from os_brick_cas import devlinks
from os_brick_cas import identity
from os_brick_cas import rbd_names
from tests.ceph import blockio
from tests.kernel import base

#: modes whose writes reach Ceph before the detach
SYNCHRONOUS = ('wt', 'wa', 'pt')


class AttachEveryModeTestCase(base.KernelTestCase):

    caches = {1: 'wt', 2: 'wb', 3: 'wa', 4: 'wo', 5: 'pt'}

    def test_attach_write_detach_in_every_mode(self):
        for cache_id, mode in sorted(self.caches.items()):
            image = self.image(mode)
            props = self.props(image, mode)
            data = blockio.pattern('%s-%s' % (mode, image), base.MIB)

            info = self.connector.connect_volume(props)
            again = self.connector.connect_volume(props)

            self.assertEqual('/dev/cas%d-1' % cache_id, info['path'], mode)
            self.assertEqual(info['path'], again['path'], mode)
            [core] = self.cores()
            self.assertEqual((cache_id, 'Active', info['path']),
                             (core.cache_id, core.status, core.exported))
            digest = self.write(info['path'], 4 * base.MIB, data)
            before = self.in_ceph(image, 4 * base.MIB, base.MIB)
            if mode in SYNCHRONOUS:
                self.assertEqual(digest, before, mode)
                self.assertEqual(0, self.dirty(core), mode)
            else:
                self.assertNotEqual(digest, before, mode)
                self.assertEqual(256, self.dirty(
                    core, golden='stats-core-csv-%s-dirty' % mode), mode)
                self.assertIn('\t%s\t' % core.device,
                              self.opencas_core_rows())
            self.assertEqual(digest, self.read(info['path'], 4 * base.MIB,
                                               base.MIB))

            self.connector.disconnect_volume(props, info)

            self.assertEqual(digest, self.in_ceph(image, 4 * base.MIB,
                                                  base.MIB), mode)
            self.assert_clean_host()


class IdentityTestCase(base.KernelTestCase):

    caches = {1: 'wt'}

    def test_udev_rule_names_the_image_from_real_sysfs(self):
        image = self.image('udev')
        mapped = base.run('rbd', 'map', '%s/%s' % (base.POOL, image))
        self.assertEqual(0, mapped.returncode, mapped.stderr)
        device = mapped.stdout.strip()
        base.run('udevadm', 'settle', '-t', '30')
        fsid = base.run('ceph', 'fsid').stdout.strip()

        found = identity.find_mapping(rbd_names.ImageSpec(
            pool=base.POOL, namespace='', image=image))
        described = identity.mapped(device)

        self.assertEqual(device, found)
        self.assertEqual((base.POOL, '', image, fsid.replace('-', '')),
                         (described.spec.pool, described.spec.namespace,
                          described.spec.image,
                          rbd_names.normal_fsid(described.spec.fsid)))
        # the product's udev rule + namer made the very link the product
        # would make itself
        link = devlinks.by_id_link(described.spec)
        self.assertTrue(os.path.islink(link), os.listdir(base.BY_ID))
        self.assertEqual(device, os.path.realpath(link))
        self.assertTrue(os.path.basename(link).startswith(
            'rbd-cas-%s-%s-' % (fsid.replace('-', ''), base.POOL)), link)

        # the connector finds that mapping and link and uses them
        props = self.props(image, 'wt')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.assertEqual(link, core.device)
        self.casadm_ok('-L', '-o', 'csv', '-b', golden='list-csv-b-core')
        self.casadm_ok('-L', '-o', 'csv', golden='list-csv-core')
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
