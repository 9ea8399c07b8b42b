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

"""A mode the loaded Open CAS release can lose writes of is not offered.

The release comes from ``<host_root>/sys/module/cas_cache/version`` (the
loaded module's MODULE_VERSION), the fixes from the build manifest when
``srcversion`` is the manifest's (the simulator writes both, as the role's
build and a loaded module do); the simulator stands in for casadm and
krbd; policy, fallback, connector and doctor are the real code.
"""

import contextlib
import io
import logging
import os

import fixtures

from cas_standin import module as sim_module
from os_brick_cas.cmd import main as cli
from os_brick_cas import exception
from tests.functional import base

DEFECT = 'ocf-hit-invalid-backfill'
CRASH = 'ocf-alock-read-holders'


class KnownDefectTestCase(base.FunctionalTestCase):

    caches = {1: 'wt', 2: 'wb'}

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.tmp, 'root')
        self.conf.config(group='os_brick_cas', host_root=self.root)
        self.load_module('26.03.2.0000.release')

    def load_module(self, version: str, manifest=None) -> None:
        sim_module.load(self.root, version, manifest)

    def doctor(self) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(['doctor'])
        return code, out.getvalue()

    def test_a_new_wb_attach_is_refused_with_what_to_do(self):
        props = self.props(self.image('volume-gate'), 'wb')
        error = self.assertRaises(exception.NoCacheForMode,
                                  self.connector.connect_volume, props)
        message = str(error)
        self.assertIn('Open CAS 26.03.2.0000.release, loaded on this host, '
                      'has a known defect that can lose acknowledged wb '
                      'writes (%s: ' % DEFECT, message)
        self.assertIn('accepted_data_loss_defects = %s' % DEFECT, message)
        self.assert_clean_host()            # nothing mapped, no core
        # wt is not exposed: it attaches as before
        info = self.connector.connect_volume(
            self.props(self.image('volume-gate-wt'), 'wt'))
        [core] = self.cores()
        self.assertEqual((1, info['path']), (core.cache_id, core.exported))

    def test_the_clean_mode_fallback_takes_wt_instead(self):
        self.conf.config(group='os_brick_cas', fallback_policy='clean-mode')
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        info = self.connector.connect_volume(
            self.props(self.image('volume-gate-fb'), 'wb'))
        self.assertEqual('wt', info['cache_mode'])
        self.assertEqual([1], [core.cache_id for core in self.cores()])
        self.assertIn('asked for cache mode wb; using mode wt', logs.output)

    def test_accepting_the_defect_or_another_release_offers_wb(self):
        for version, accepted in (('25.12.2.0000.release', []),
                                  ('24.9.0.0900.release', []),
                                  ('26.03.2.0000.release', [DEFECT])):
            self.load_module(version)
            self.conf.config(group='os_brick_cas',
                             accepted_data_loss_defects=accepted)
            props = self.props(self.image('volume-ok'), 'wb')
            info = self.connector.connect_volume(props)
            self.assertEqual('wb', info['cache_mode'], version)
            self.connector.disconnect_volume(props, info)
            self.assert_clean_host()

    def test_a_volume_cached_before_keeps_working_and_is_flushed(self):
        # cached under a release without the defect, dirty, then the
        # defective module is what the host reports: its data is not
        # stranded (re-attach, then detach with the flush)
        self.load_module('25.12.2.0000.release')
        props = self.props(self.image('volume-before'), 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(2, core.core_id, 64)
        self.load_module('26.03.2.0000.release')
        again = self.connector.connect_volume(props)
        self.assertEqual(info['path'], again['path'])
        self.connector.disconnect_volume(props, again)
        verbs = [argv[1] for argv in self.casadm_argvs()]
        self.assertLess(verbs.index('--flush-cache'),
                        verbs.index('--remove-core'))
        self.assert_clean_host()

    def test_doctor_fails_the_mode_and_names_the_defect(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(['doctor'])
        self.assertEqual(2, code)         # a FAIL
        [line] = [line for line in out.getvalue().splitlines()
                  if 'mode wb -> cache instance 2' in line]
        self.assertTrue(line.startswith('FAIL'), line)
        self.assertIn(DEFECT, line)
        self.assertIn('OK   mode wt -> cache instance 1 is running',
                      out.getvalue())

    def test_doctor_warns_of_the_crash_defect_in_every_mode(self):
        code, out = self.doctor()
        [line] = [line for line in out.splitlines() if CRASH in line]
        self.assertTrue(line.startswith('WARN Open CAS 26.03.2.0000.release '
                                        'has known defect %s' % CRASH), line)
        self.assertIn('no build manifest', line)
        self.load_module('25.12.2.0000.release')
        self.assertNotIn(CRASH, self.doctor()[1])


class PatchedBuildTestCase(base.FunctionalTestCase):
    """The role's patched v26.03.2 build: wb offered, nothing accepted."""

    caches = {1: 'wt', 2: 'wb'}

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.tmp, 'root')
        self.conf.config(group='os_brick_cas', host_root=self.root,
                         accepted_data_loss_defects=[])
        self.built = sim_module.build(self.root, '26.03.2.0000.release')
        sim_module.load(self.root, '26.03.2.0000.release', self.built)

    def doctor(self) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(['doctor'])
        return code, out.getvalue()

    def test_wb_attaches_and_doctor_says_both_defects_are_fixed(self):
        props = self.props(self.image('volume-patched'), 'wb')
        info = self.connector.connect_volume(props)
        self.assertEqual('wb', info['cache_mode'])
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()
        code, out = self.doctor()
        self.assertIn('OK   mode wb -> cache instance 2 is running', out)
        for key in (DEFECT, CRASH):
            self.assertIn('OK   Open CAS 26.03.2.0000.release: known defect '
                          '%s is fixed in the loaded module (the loaded '
                          'module is the build of /usr/lib/opencas/'
                          'os-brick-cas-build.json (0001-' % key, out)
        self.assertNotIn('FAIL', out)

    def test_the_unpatched_module_loaded_keeps_the_gate(self):
        # the manifest is the patched build's, but the module loaded is
        # another (the release's own, loaded before the build was installed)
        sim_module.load(self.root, '26.03.2.0000.release')
        props = self.props(self.image('volume-stale-module'), 'wb')
        error = self.assertRaises(exception.NoCacheForMode,
                                  self.connector.connect_volume, props)
        self.assertIn(DEFECT, str(error))
        self.assert_clean_host()
        code, out = self.doctor()
        self.assertEqual(2, code)
        self.assertIn('is not the build of /usr/lib/opencas/'
                      'os-brick-cas-build.json (srcversion %s)'
                      % self.built['srcversion'], out)

    def test_a_manifest_without_the_fix_keeps_the_gate(self):
        # the role run with os_brick_cas_opencas_patches: [] (unpatched)
        unpatched = sim_module.build(self.root, '26.03.2.0000.release',
                                     patched=False)
        sim_module.load(self.root, '26.03.2.0000.release', unpatched)
        error = self.assertRaises(
            exception.NoCacheForMode, self.connector.connect_volume,
            self.props(self.image('volume-unpatched'), 'wb'))
        self.assertIn(DEFECT, str(error))
        self.assertIn('WARN Open CAS 26.03.2.0000.release has known defect '
                      '%s' % CRASH, self.doctor()[1])


class IoSchedulerTestCase(base.FunctionalTestCase):
    """cas_cache loaded with use_io_scheduler=0: wt/wa write hits lazy.

    Open CAS then sends write-through and write-around write hits down
    OCF's write-back fast path (shown in OCF's pyocf on v26.03.2): doctor
    fails while such an instance is configured.
    """

    caches = {1: 'wt', 2: 'wb'}

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.tmp, 'root')
        self.conf.config(group='os_brick_cas', host_root=self.root)

    def doctor(self, use_io_scheduler: int) -> tuple[int, list[str]]:
        sim_module.load(self.root, '25.12.2.0000.release',
                        use_io_scheduler=use_io_scheduler)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(['doctor'])
        return code, [line for line in out.getvalue().splitlines()
                      if 'use_io_scheduler' in line]

    def test_doctor_fails_a_host_serving_wt_without_the_scheduler(self):
        code, [line] = self.doctor(0)
        self.assertEqual(2, code)
        self.assertTrue(line.startswith(
            'FAIL cas_cache is loaded with use_io_scheduler=0: Open CAS then '
            'serves wt and wa write hits on its write-back fast path'), line)
        self.assertIn('this host serves wt ([os_brick_cas] '
                      'cache_instances)', line)
        self.assertIn('use_io_scheduler=1 (its default)', line)

    def test_the_default_passes_and_a_wb_only_host_is_warned(self):
        code, [line] = self.doctor(1)
        self.assertEqual('OK   cas_cache use_io_scheduler=1: write-through '
                         'and write-around write hits reach Ceph at once',
                         line)
        self.conf.config(group='os_brick_cas', cache_instances={'wb': '2'})
        _code, [line] = self.doctor(0)
        self.assertTrue(line.startswith('WARN cas_cache is loaded with '
                                        'use_io_scheduler=0'), line)
        self.assertIn('no such instance is configured yet', line)
