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

"""The stand-in's per-release columns and "Dirty for" (simulator/stats)."""

import testtools

from cas_standin import releases
from cas_standin import stats
from tests.functional.simulator import real_samples

DEFERRED = ['Read deferred [Requests]', 'Read deferred [%]',
            'Write deferred [Requests]', 'Write deferred [%]']


class ReleaseColumnsTestCase(testtools.TestCase):

    def test_versions_pick_releases(self):
        for version, name in (
                (None, '26.03'), ('26.03.2.0000.release', '26.03'),
                ('25.12.2.0000.release', '25.12'),
                ('24.09.0.0000.release', '24.9'),
                ('22.06.0.0705.release', '24.9'),
                ('26.03.2.0000.master', 'master')):
            self.assertEqual(name, releases.of(version).name, version)

    def test_v26_03_is_the_recorded_header(self):
        self.assertEqual(real_samples.header(real_samples.CACHE_STATS),
                         stats.cache_columns(releases.V26_03))
        self.assertEqual(real_samples.header(real_samples.CORE_STATS),
                         stats.core_columns(releases.V26_03))

    def test_older_releases_lack_the_deferred_rows(self):
        for release in (releases.V24_9, releases.V25_12):
            for columns, newer in (
                    (stats.cache_columns, real_samples.CACHE_STATS),
                    (stats.core_columns, real_samples.CORE_STATS)):
                self.assertEqual(
                    [c for c in real_samples.header(newer)
                     if c not in DEFERRED], columns(release))
        self.assertEqual((79, 74), (
            len(stats.cache_columns(releases.V24_9)),
            len(stats.core_columns(releases.V25_12))))

    def test_master_adds_prefetch_and_cleaner_columns(self):
        cache = stats.cache_columns(releases.MASTER)
        core = stats.core_columns(releases.MASTER)
        self.assertEqual((98, 92), (len(cache), len(core)))
        self.assertEqual(cache.index('Prefetch Policy'),
                         cache.index('Promotion Policy') + 1)

    def test_dirty_for(self):
        self.assertEqual({'Dirty for [s]': '0', 'Dirty for': 'Cache clean'},
                         stats.dirty_for(0))
        self.assertEqual('2 [s]', stats.dirty_for(2)['Dirty for'])
        self.assertEqual('1 [d] 1 [h] 2 [m] 3 [s]',
                         stats.dirty_for(86400 + 3723)['Dirty for'])
        core = {'dirty': 8, 'dirty_since': 100.0}
        # OCF counts whole seconds: dirty for 0.9 s reads "Cache clean"
        self.assertEqual(0, stats.dirty_seconds(core, now=100.9))
        self.assertEqual(3, stats.dirty_seconds(core, now=103.2))
        self.assertEqual(0, stats.dirty_seconds(dict(core, dirty=0),
                                                now=103.2))
