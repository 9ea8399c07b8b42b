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

"""Link names that identify one image; krbd's sysfs as the namer reads it."""

import os

import fixtures
import testtools

from os_brick_cas import rbd_names

FSID = '5e1dca5e-0000-4000-8000-0000c0ffee00'


def spec(pool, image, namespace=''):
    return rbd_names.ImageSpec(pool, namespace, image,
                               rbd_names.normal_fsid(FSID))


class LinkNameTestCase(testtools.TestCase):

    def test_names_that_collided_in_1x_differ(self):
        first, second = spec('a-b', 'c'), spec('a', 'b-c')
        self.assertEqual(first.legacy_link_name(),
                         second.legacy_link_name())
        self.assertNotEqual(first.link_name(), second.link_name())

    def test_one_path_form_for_every_message(self):
        # the image path was hand-joined in six modules (issue 38: one
        # formatter per domain object); they all use ImageSpec.path now
        self.assertEqual('volumes/volume-1', spec('volumes', 'volume-1').path)
        self.assertEqual('p/ns-1/img',
                         spec('p', 'img', namespace='ns-1').path)
        self.assertEqual('p/img (cluster %s)' % rbd_names.normal_fsid(FSID),
                         spec('p', 'img').label)

    def test_round_trip_of_odd_names(self):
        for item in (spec('volumes', 'volume-1'), spec('a b%', 'ü-x'),
                     spec('p', 'img', namespace='ns-1'),
                     spec('p.q', 'i+j_k')):
            name = item.link_name()
            self.assertNotIn('/', name)
            self.assertEqual(item, rbd_names.parse_link_name(name))

    def test_namespace_and_cluster_are_part_of_the_name(self):
        self.assertNotEqual(spec('p', 'i').link_name(),
                            spec('p', 'i', namespace='n').link_name())
        other = rbd_names.ImageSpec('p', '', 'i', '0' * 32)
        self.assertNotEqual(spec('p', 'i').link_name(), other.link_name())

    def test_foreign_names_are_not_parsed(self):
        for name in ('rbd-volumes-volume-1', 'rbd-cas-xyz-p--i',
                     'rbd-cas-%s-p--i-extra' % ('0' * 32),
                     'rbd-cas-%s-p--i%%2d' % ('0' * 32),   # not canonical
                     'rbd-cas-%s---i' % ('0' * 32)):       # empty pool
            self.assertIsNone(rbd_names.parse_link_name(name), name)


class NamerTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path

    def publish(self, dev_id, **attributes):
        directory = os.path.join(self.root, str(dev_id))
        os.makedirs(directory)
        values = dict(pool='volumes', pool_ns='', name='volume-1', snap='-',
                      cluster_fsid=FSID)
        values.update(attributes)
        for key, value in values.items():
            with open(os.path.join(directory, key), 'w') as attribute:
                attribute.write(value + '\n')

    def test_image_gets_its_identifying_name(self):
        self.publish(3)
        self.assertEqual(spec('volumes', 'volume-1').link_name(),
                         rbd_names.udev_link_name(3, self.root))

    def test_snapshot_never_claims_the_image_link(self):
        self.publish(4, snap='snap-1')
        self.assertIsNone(rbd_names.udev_link_name(4, self.root))

    def test_unknown_device_gets_no_name(self):
        self.assertIsNone(rbd_names.udev_link_name(9, self.root))
