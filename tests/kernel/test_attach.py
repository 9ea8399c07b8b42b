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

"""Identity from real krbd sysfs and the product's udev rule.

Attach/detach in every mode: tests/host_contract.py (test_contract).
"""

import os

from os_brick_cas import devlinks
from os_brick_cas.host import installed_files
from os_brick_cas import identity
from os_brick_cas import rbd_names
from tests.kernel import base


class IdentityTestCase(base.KernelTestCase):

    caches = {1: 'wt'}

    def test_udev_rule_names_the_image_from_real_sysfs(self):
        # udev runs the rule "host install-files" renders for this
        # installation (its namer: python -I -S rbd_names.py)
        [planned] = installed_files.plan(kinds=(installed_files.UDEV_RULE,))
        with open(planned.dest) as installed:
            self.assertEqual(planned.content, installed.read())
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
