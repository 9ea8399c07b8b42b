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

import json
import os

import fixtures


from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import known_defects
from os_brick_cas import opts
from os_brick_cas import policy
from tests.unit.os_brick_cas import base

WT = modes.CacheMode.WRITE_THROUGH
WB = modes.CacheMode.WRITE_BACK
WO = modes.CacheMode.WRITE_ONLY
PT = modes.CacheMode.PASS_THROUGH


def host(*caches: tuple[int, str, str]) -> list[casadm_output.CacheInstance]:
    return [casadm_output.CacheInstance(cache_id, '/dev/nvme0n1p%d' % cache_id,
                                        status, mode)
            for cache_id, mode, status in caches]


class CachePolicyTestCase(base.TestCase):

    def test_from_conf(self):
        self.set_instances('wt:1,wb:2', opts.FALLBACK_CLEAN_MODE)
        chosen = policy.CachePolicy.from_conf()
        self.assertEqual({WT: 1, WB: 2}, chosen.instances)
        self.assertEqual(opts.FALLBACK_CLEAN_MODE, chosen.fallback_policy)

    def test_place_requested_mode(self):
        chosen = policy.CachePolicy({'wt': '1', 'wb': '2'})
        placement = chosen.place(WB, host((1, 'wt', 'Running'),
                                          (2, 'wb', 'Incomplete')))
        self.assertEqual((WB, 2, False),
                         (placement.mode, placement.cache_id,
                          placement.fell_back))

    def test_mode_mismatch_is_an_error_even_with_fallback(self):
        chosen = policy.CachePolicy({'wt': '1', 'wb': '2'},
                                    opts.FALLBACK_UNCACHED)
        exc = self.assertRaises(exception.CacheModeMismatch, chosen.place,
                                WB, host((1, 'wt', 'Running'),
                                         (2, 'wt', 'Running')))
        self.assertIn('instance 2', str(exc))
        self.assertIn('1=wt, 2=wt', str(exc))

    def test_stopped_instance_fails_without_fallback(self):
        chosen = policy.CachePolicy({'wb': '2'})
        exc = self.assertRaises(exception.NoCacheForMode, chosen.place, WB,
                                host((2, 'wb', 'Stopping')))
        self.assertIn('Stopping', str(exc))
        self.assertIn('fallback_policy', str(exc))

    def test_missing_instance_fails_without_fallback(self):
        chosen = policy.CachePolicy({'wb': '2'})
        self.assertRaises(exception.NoCacheForMode, chosen.place, WB, [])

    def test_clean_fallback_goes_to_write_through(self):
        chosen = policy.CachePolicy({'wt': '1', 'wb': '2'},
                                    opts.FALLBACK_CLEAN_MODE)
        placement = chosen.place(WB, host((1, 'wt', 'Running')))
        self.assertEqual((WT, 1, True), (placement.mode, placement.cache_id,
                                         placement.fell_back))

    def test_fallback_never_goes_towards_dirty_modes(self):
        chosen = policy.CachePolicy({'wt': '1', 'wb': '2', 'wo': '3'},
                                    opts.FALLBACK_CLEAN_MODE)
        self.assertRaises(exception.NoCacheForMode, chosen.place, WT,
                          host((2, 'wb', 'Running'), (3, 'wo', 'Running')))

    def test_uncached_fallback(self):
        chosen = policy.CachePolicy({'wb': '2'}, opts.FALLBACK_UNCACHED)
        placement = chosen.place(WB, [])
        self.assertFalse(placement.cached)
        self.assertIsNone(placement.mode)

    def test_bad_maps(self):
        for bad in ({'xx': '1'}, {'wt': 'one'}, {'wt': '0'},
                    {'wt': '1', 'wb': '1'}):
            self.assertRaises(exception.InvalidInput, policy.CachePolicy, bad)

    def test_problems_lists_each_bad_mode(self):
        chosen = policy.CachePolicy({'wt': '1', 'wb': '2', 'pt': '3'})
        found = chosen.problems(host((1, 'wt', 'Running'),
                                     (2, 'wt', 'Running')))
        self.assertEqual({WB, PT}, set(found))
        self.assertIsInstance(found[WB], exception.CacheModeMismatch)
        self.assertIsInstance(found[PT], exception.CacheNotFound)

    def test_only_wb_and_wo_hold_dirty_data(self):
        self.assertEqual({WB, WO}, {m for m in modes.CacheMode
                                    if m.holds_dirty_data})


class KnownDefectsTestCase(base.TestCase):
    """Which loaded releases lose which modes' writes (known_defects)."""

    def unaccepted(self, mode, version, accepted=()):
        self.conf.config(group='os_brick_cas',
                         accepted_data_loss_defects=list(accepted))
        return [defect.key for defect in
                known_defects.unaccepted(mode, version, self.conf.conf)]

    def test_v26_03_and_later_lose_wb_and_wo_writes_until_a_fix_is_known(
            self):
        for version in ('26.03.2.0000.release', '26.03.4.0000.release',
                        '26.09.0.0000.release'):
            for mode in (WB, WO):
                self.assertEqual(['ocf-hit-invalid-backfill'],
                                 self.unaccepted(mode, version), version)
            self.assertEqual([], self.unaccepted(WT, version))

    def test_earlier_lines_an_unknown_module_and_accepted_defects_pass(self):
        for version in ('25.12.2.0000.release', '24.9.0.0900.release', None,
                        'unparsable'):
            self.assertEqual([], self.unaccepted(WB, version), version)
        self.assertEqual([], self.unaccepted(
            WB, '26.03.2.0000.release', ['ocf-hit-invalid-backfill']))

    def test_from_conf_marks_only_the_exposed_mode_unusable(self):
        root = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(root, known_defects.VERSION_FILE)
        os.makedirs(os.path.dirname(path))
        with open(path, 'w') as version_file:
            version_file.write('26.03.2.0000.release\n')
        self.conf.config(group='os_brick_cas', host_root=root,
                         cache_instances={'wt': '1', 'wb': '2'})
        chosen = policy.CachePolicy.from_conf(self.conf.conf)
        problems = chosen.problems(host((1, 'wt', 'Running'),
                                        (2, 'wb', 'Running')))
        self.assertEqual([WB], list(problems))
        self.assertIsInstance(problems[WB], exception.OpenCasDataLossDefect)

    def test_crash_defect_of_v26_03_warns_in_every_mode_never_gates(self):
        self.assertEqual(['ocf-alock-read-holders'], [
            defect.key for defect in known_defects.crash_defects(
                '26.03.2.0000.release', self.conf.conf, frozenset())])
        self.assertEqual([], known_defects.crash_defects(
            '25.12.2.0000.release', self.conf.conf, frozenset()))
        for mode in modes.CacheMode:        # not a data-loss gate
            self.assertNotIn('ocf-alock-read-holders',
                             self.unaccepted(mode, '26.03.2.0000.release'))


class LoadedModuleTestCase(base.TestCase):
    """A build's fixes count only for the module its manifest describes."""

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group='os_brick_cas', host_root=self.root,
                         accepted_data_loss_defects=[])

    def write(self, relative, text):
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as out:
            out.write(text)

    def load(self, srcversion, fixes=('ocf-hit-invalid-backfill',),
             manifest_srcversion='ABC123'):
        self.write(known_defects.VERSION_FILE, '26.03.2.0000.release\n')
        self.write(known_defects.SRCVERSION_FILE, srcversion + '\n')
        self.write(known_defects.MANIFEST_FILE, json.dumps({
            'release': 'v26.03.2', 'srcversion': manifest_srcversion,
            'fixes': list(fixes),
            'patches': [{'name': '0001-x.patch', 'sha256': '0' * 64}]}))

    def gate(self, mode=WB):
        return [defect.key for defect in known_defects.unaccepted(
            mode, known_defects.loaded_version(self.conf.conf),
            self.conf.conf)]

    def test_the_manifests_module_loaded_has_its_fixes(self):
        self.load('ABC123')
        module = known_defects.loaded_module(self.conf.conf)
        self.assertEqual(frozenset({'ocf-hit-invalid-backfill'}), module.fixed)
        self.assertIn('0001-x.patch', module.note)
        self.assertEqual([], self.gate())
        self.assertEqual([], self.gate(WO))

    def test_another_module_loaded_keeps_the_gate(self):
        self.load('DEF456')
        module = known_defects.loaded_module(self.conf.conf)
        self.assertEqual(frozenset(), module.fixed)
        self.assertIn('srcversion DEF456', module.note)
        self.assertEqual(['ocf-hit-invalid-backfill'], self.gate())

    def test_no_srcversion_or_a_broken_manifest_keeps_the_gate(self):
        self.load('ABC123')
        os.unlink(os.path.join(self.root, known_defects.SRCVERSION_FILE))
        self.assertEqual(['ocf-hit-invalid-backfill'], self.gate())
        self.load('ABC123')
        self.write(known_defects.MANIFEST_FILE, '{"srcversion": "ABC1')
        self.assertEqual(['ocf-hit-invalid-backfill'], self.gate())
        self.write(known_defects.MANIFEST_FILE, '["ABC123"]')
        self.assertEqual(['ocf-hit-invalid-backfill'], self.gate())

    def test_a_manifest_that_lists_no_fix_keeps_the_gate(self):
        self.load('ABC123', fixes=())
        self.assertEqual(['ocf-hit-invalid-backfill'], self.gate())

    def test_fixes_apply_only_to_the_loaded_version(self):
        # casadm's version before the module is loaded: no fix counted
        self.load('ABC123')
        self.assertEqual(['ocf-hit-invalid-backfill'], [
            defect.key for defect in known_defects.unaccepted(
                WB, '26.03.2.1032.release', self.conf.conf)])
