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

"""Host layout: validation per field, per-mode defaults, release gating."""

import os

import testtools

from os_brick_cas import exception
from os_brick_cas.host import layout_file
from os_brick_cas.opencas import casadm_params as params

SAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                      'host-layout.yaml.sample')
BY_ID = '/dev/disk/by-id/nvme-SSD_1234'
V24_9, V25_3, V25_12, V26_3 = (24, 9), (25, 3), (25, 12), (26, 3)


def layout(*instances: str, top: str = '') -> layout_file.HostLayout:
    text = top + 'instances:\n' + ''.join(
        '  - %s\n' % instance for instance in instances)
    return layout_file.parse(text, 'test.yaml')


def values(instance: layout_file.InstanceLayout, release) -> dict:
    return {(s.param.namespace, s.param.option): s.value
            for s in instance.settings(release)}


class ValidationTestCase(testtools.TestCase):

    def problems(self, *instances: str, top: str = '') -> str:
        exc = self.assertRaises(exception.HostLayoutInvalid, layout,
                                *instances, top=top)
        return str(exc)

    def test_the_shipped_sample_is_valid(self):
        sample = layout_file.load(SAMPLE)
        self.assertEqual([(1, 'wt'), (2, 'wb')],
                         [(i.cache_id, i.mode.value)
                          for i in sample.instances])
        self.assertEqual(200, sample.flush_rate_mib_s)

    def test_each_bad_field_is_named_in_one_error(self):
        text = self.problems(
            '{id: 0, mode: wx, device: /dev/sda, line_size_kib: 5}',
            '{id: 2, mode: wb, device: %s, colour: red}' % BY_ID,
            '{id: 3, mode: wb, device: %s-part2, cleaning: {policy: acp, '
            'wake_up_s: 5}}' % BY_ID,
            '{id: 4, mode: wb, device: %s-part3, cleaning: {wake_up_s: '
            '9999, activity_threshold_ms: -1}}' % BY_ID,
            '{id: 5, mode: wt, device: %s-part4, seq_cutoff: {policy: '
            'sometimes}, promotion: {trigger_pct: 101}}' % BY_ID,
            '{mode: wt}')
        for expected in (
                'instances[0].id: must be between 1 and 16384, not 0',
                'instances[0].mode: must be one of wt, wb, wa, wo, pt',
                'instances[0].device: casadm takes a cache device only by '
                'its /dev/disk/by-id link',
                'instances[0].line_size_kib: must be one of 4, 8, 16, 32, '
                '64, not 5',
                'instances[1].colour: unknown field',
                'instances[2].cleaning.wake_up_s: not a parameter of '
                'cleaning policy acp (it takes: policy, wake_up_ms, '
                'flush_max_buffers)',
                'instances[3].cleaning.wake_up_s: must be between 0 and '
                '3600, not 9999',
                'instances[3].cleaning.activity_threshold_ms: must be '
                'between 0 and 1000000, not -1',
                'instances[4].seq_cutoff.policy: must be one of always, '
                'full, never',
                'instances[4].promotion.trigger_pct: must be between 0 and '
                '100, not 101',
                'instances[5].id: missing (required)',
                'instances[5].device: missing (required)'):
            self.assertIn(expected, text)
        self.assertIn('test.yaml is invalid; nothing was changed', text)

    def test_duplicate_ids_and_devices(self):
        text = self.problems('{id: 1, mode: wt, device: %s-part1}' % BY_ID,
                             '{id: 1, mode: wb, device: %s-part1}' % BY_ID)
        self.assertIn('instances[1].id: cache id 1 is also used by '
                      'instances[0]', text)
        self.assertIn('instances[1].device: %s-part1 is also used by '
                      'instances[0]' % BY_ID, text)

    def test_document_level_problems(self):
        self.assertIn('instances: must be a non-empty list',
                      str(self.assertRaises(exception.HostLayoutInvalid,
                                            layout_file.parse, 'version: 1')))
        self.assertIn('not YAML', str(self.assertRaises(
            exception.HostLayoutInvalid, layout_file.parse, 'a: [')))
        self.assertIn('flush_rate_mib_s: must be a positive number',
                      self.problems('{id: 1, mode: wt, device: /dev/ram0}',
                                    top='flush_rate_mib_s: 0\n'))
        self.assertIn('cannot read it', str(self.assertRaises(
            exception.HostLayoutInvalid, layout_file.load, '/nonexistent')))

    def test_ram_disks_are_accepted_for_ci(self):
        found = layout('{id: 1, mode: wb, device: /dev/ram0}')
        self.assertEqual('/dev/ram0', found.instances[0].device)


class DefaultsTestCase(testtools.TestCase):

    def test_write_back_defaults_bound_dirty_data(self):
        [wb] = layout('{id: 2, mode: wb, device: /dev/ram1}').instances
        found = values(wb, V26_3)
        self.assertEqual('alru', found[('cleaning', 'policy')])
        self.assertEqual(1000, found[('cleaning-alru',
                                      'activity-threshold')])
        self.assertEqual(20, found[('cleaning-alru',
                                    'dirty-ratio-threshold')])
        self.assertEqual(('always', 64), (found[('seq-cutoff', 'policy')],
                                          found[('seq-cutoff', 'threshold')]))
        self.assertEqual('always', found[('promotion', 'policy')])
        self.assertEqual(20, wb.dirty_ratio_pct(V26_3))

    def test_write_through_defaults_use_nhit(self):
        [wt] = layout('{id: 1, mode: wt, device: /dev/ram0}').instances
        found = values(wt, V26_3)
        self.assertEqual(('nhit', 3, 80), (
            found[('promotion', 'policy')],
            found[('promotion-nhit', 'threshold')],
            found[('promotion-nhit', 'trigger')]))
        self.assertIsNone(wt.dirty_ratio_pct(V26_3))

    def test_written_values_win_and_other_policies_get_open_cas_defaults(
            self):
        [wb] = layout('{id: 2, mode: wb, device: /dev/ram1, cleaning: '
                      '{policy: acp, wake_up_ms: 50}}').instances
        found = values(wb, V26_3)
        self.assertEqual(('acp', 50, 128), (
            found[('cleaning', 'policy')],
            found[('cleaning-acp', 'wake-up')],
            found[('cleaning-acp', 'flush-max-buffers')]))
        self.assertNotIn(('cleaning-alru', 'wake-up'), found)
        self.assertIsNone(wb.dirty_ratio_pct(V26_3))   # acp: no cap

    def test_dirty_ratio_default_dropped_before_25_12(self):
        [wb] = layout('{id: 2, mode: wb, device: /dev/ram1}').instances
        for release in (V24_9, V25_3, None):
            found = values(wb, release)
            self.assertNotIn(('cleaning-alru', 'dirty-ratio-threshold'),
                             found)
            self.assertEqual(1000, found[('cleaning-alru',
                                          'activity-threshold')])
            self.assertIsNone(wb.dirty_ratio_pct(release))
        self.assertIn(('cleaning-alru', 'dirty-ratio-inertia'),
                      values(wb, V25_12))

    def test_explicit_dirty_ratio_refused_before_25_12(self):
        [wb] = layout('{id: 2, mode: wb, device: /dev/ram1, cleaning: '
                      '{dirty_ratio_threshold_pct: 10}}').instances
        exc = self.assertRaises(exception.HostLayoutRefused, wb.settings,
                                V25_3)
        self.assertIn('cleaning.dirty_ratio_threshold_pct needs Open CAS '
                      'v25.12 or newer (casadm --dirty-ratio-threshold); '
                      'this host runs v25.03', str(exc))
        self.assertEqual(10, values(wb, V25_12)[
            ('cleaning-alru', 'dirty-ratio-threshold')])

    def test_every_default_is_within_casadm_range(self):
        for defaults in (layout_file.DIRTY_DEFAULTS,
                         layout_file.CLEAN_DEFAULTS):
            for section, fields in defaults.items():
                policy = fields['policy']
                namespace = params.namespace_of_policy(section, policy)
                for field, value in fields.items():
                    if field == 'policy':
                        continue
                    param = params.find(namespace or section, field)
                    self.assertTrue(param.low <= value <= param.high,
                                    (section, field, value))
