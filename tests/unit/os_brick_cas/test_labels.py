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

"""A core says itself one way: records, reports and errors (issue 38)."""

import ast
import os
import re

import testtools

import os_brick_cas
from os_brick_cas import exception
from os_brick_cas import labels
from os_brick_cas.opencas import casadm_output
from os_brick_cas import report

ROOT = os.path.dirname(os_brick_cas.__file__)
#: the product's packages (the stand-in speaks casadm's words, not ours)
PACKAGES = [os.path.join(os.path.dirname(ROOT), name)
            for name in ('os_brick_cas', 'nova_ext', 'cinder_ext')]
#: a core formatted by hand: "core %d of instance %d", "Core %(core)s of
#: cache instance ..."
HAND_FORMATTED = re.compile(r'[Cc]ore %[(\w)]*[ds] of (cache )?instance')


class CoreLabelTestCase(testtools.TestCase):

    def test_wording(self):
        self.assertEqual('core 3 of cache instance 1', labels.core(1, 3))
        self.assertEqual('all cores of cache instance 2',
                         labels.core(2, None))
        self.assertEqual('all cores of cache instance 2',
                         labels.core(2, 'all'))

    def test_records_say_it_the_same_way(self):
        core = casadm_output.Core(cache_id=1, core_id=3, device='/dev/x',
                                  status='Active', exported='/dev/cas1-3')
        self.assertEqual('core 3 of cache instance 1', core.label)
        row = report.CoreReport(
            cache_id=1, core_id=3, core_device='/dev/x', exported=None,
            status='Active', volume_id=None, rbd_image=None,
            rbd_device=None, dirty_blocks=0, occupancy_blocks=0,
            read_hit_ratio=None, write_hit_ratio=None)
        self.assertEqual(core.label, row.label)
        self.assertEqual(core.label, row.core.label)

    def test_errors_say_it_the_same_way(self):
        for error in (exception.DirtyDataPresent(action='detach', core=3,
                                                 cache_id=1, dirty=8),
                      exception.CoreInactive(core=3, cache_id=1,
                                             device='/dev/x'),
                      exception.FlushFailed(core=3, cache_id=1,
                                            detail='EIO')):
            self.assertIn('core 3 of cache instance 1', str(error))
        self.assertIn('Flushing all cores of cache instance 1 failed',
                      str(exception.FlushFailed(core='all', cache_id=1,
                                                detail='EIO')))

    def test_no_module_formats_a_core_by_hand(self):
        offenders = []
        for path in self.product_modules():
            with open(path) as source:
                tree = ast.parse(source.read(), path)
            offenders += ['%s:%d' % (os.path.relpath(path, ROOT),
                                     node.lineno)
                          for node in ast.walk(tree)
                          if isinstance(node, ast.Constant) and
                          isinstance(node.value, str) and
                          HAND_FORMATTED.search(node.value)]
        self.assertEqual([], offenders)

    @staticmethod
    def product_modules():
        for package in PACKAGES:
            for directory, dirs, files in os.walk(package):
                for name in files:
                    if name.endswith('.py') and name != 'labels.py':
                        yield os.path.join(directory, name)
