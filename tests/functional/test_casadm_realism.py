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

import csv
import io
import os
import re
import shlex
import shutil
import subprocess

import fixtures
import testtools

from cas_standin import casadm as sim_casadm
from cas_standin import fixture as sim_fixture
from cas_standin import state as sim_state
from os_brick_cas import casadm
from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import opencas_conf
from os_brick_cas.opencas import stand_in
from os_brick_cas import rbd_names
from tests.functional import base
from tests.functional.simulator import real_samples


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True,
                          env=os.environ.copy())


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


class UdevLoaderTestCase(base.FunctionalTestCase):
    """open-cas-loader try-adds a listed core as soon as its link appears."""

    def _dirty_inactive(self, name: str) -> tuple[dict, casadm_output.Core]:
        image = self.image(name)
        props = self.props(image, 'wb')
        self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 48)
        self.host.reboot()
        [core] = self.cores()
        self.assertEqual('Inactive', core.status)
        return props, core

    def _loader_won_try_add(self) -> None:
        try_adds = [call for call in self.host.calls('casadm', 'try-add')]
        self.assertEqual([1], [call['exit_code'] for call in try_adds])
        self.assertEqual(1, len(self.host.state()['loader_added']))

    def test_attach_reactivation_tolerates_the_loader(self):
        props, old = self._dirty_inactive('volume-loader-attach')
        self.host.set_udev_loader(True)

        info = self.connector.connect_volume(props)

        self._loader_won_try_add()
        [core] = self.cores()
        self.assertEqual(('Active', old.core_id, 48),
                         (core.status, core.core_id, self.dirty(core)))
        self.assertEqual(core.exported, info['path'])
        self.connector.disconnect_volume(props, info)
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()

    def test_detach_remap_for_flush_tolerates_the_loader(self):
        props, old = self._dirty_inactive('volume-loader-detach')
        # the loader acts between the detach's -L and its own try-add
        self.host.set_udev_loader(True, lag=3)

        self.connector.disconnect_volume(props, None)

        self._loader_won_try_add()
        self.assertEqual(48, self.host.state()['flushed_blocks'])
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()


class KrbdBusyTestCase(base.FunctionalTestCase):
    """A forced unmap kills the core.

    The refused unmap a core blocks is a host-contract scenario
    (tests/host_contract.py, run by tests/ceph and tests/kernel).
    """

    def test_force_unmap_leaves_an_active_core_that_cannot_flush(self):
        image = self.image('volume-forced')
        props = self.props(image, 'wb')
        self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 32)
        [mapping] = self.mappings()
        busy = run('rbd', 'unmap', mapping['device'])
        self.assertEqual((16, 'rbd: sysfs write failed\nrbd: unmap failed: '
                              '(16) Device or resource busy\n'),
                         (busy.returncode, busy.stderr))
        self._tool('rbd', 'unmap', '-o', 'force', mapping['device'])
        self.assertEqual([], self.mappings())
        [core] = self.cores()
        self.assertEqual('Active', core.status)
        flush = run('casadm', '-F', '-i', '2', '-j', str(core.core_id))
        self.assertEqual((1, 'I/O error\n'),
                         (flush.returncode, flush.stderr))

        self.assertRaises(exception.CasError,
                          self.connector.disconnect_volume, props, None)
        [core] = self.cores()
        self.assertEqual(('Active', 32), (core.status, self.dirty(core)))
        self.assertIn((2, core.core_id),
                      opencas_conf.read(self.opencas_conf).cores)
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])


class IncompleteCacheFlushTestCase(base.FunctionalTestCase):
    """-F/-T of an Incomplete cache are refused; a per-core -F is not."""

    def test_whole_cache_refused_core_flush_and_detach_work(self):
        attached = {}
        for name in ('volume-inc-a', 'volume-inc-b'):
            props = self.props(self.image(name), 'wb')
            self.connector.connect_volume(props)
            attached[name] = props
        for core in self.cores():
            self.host.set_dirty(core.cache_id, core.core_id, 16)
        self.host.reboot()
        info = self.connector.connect_volume(attached['volume-inc-a'])
        self.assertEqual('Incomplete', self.cache_list()[1].status)

        for argv, first in ((('-F', '-i', '2'), ''),
                            (('-T', '-i', '2'),
                             'Error while stopping cache 2\n')):
            refused = run('casadm', *argv)
            self.assertEqual((1, first + sim_casadm.INCOMPLETE),
                             (refused.returncode, refused.stderr))
        exc = self.assertRaises(exception.FlushFailed, casadm.Casadm().flush,
                                2, None, 5)
        self.assertIn('Incomplete', str(exc))
        self.assertEqual(2, len(self.cores()))

        # detach flushes its own core only: allowed on an Incomplete cache
        self.connector.disconnect_volume(attached['volume-inc-a'], info)
        [left] = self.cores()
        self.assertEqual(('Inactive', 16), (left.status, self.dirty(left)))
        self.assertEqual(16, self.host.state()['flushed_blocks'])
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])


class OldReleaseTestCase(base.FunctionalTestCase):
    """Before v24.9 per-core flush is -E and -F takes no -j."""

    def test_detach_on_v22_6_refuses_and_keeps_the_data(self):
        self.host.set_version('22.6.3.0724.release')
        self.assertEqual('22.6.3.0724.release',
                         casadm.Casadm().version()['CAS CLI Utility'])
        props = self.props(self.image('volume-old'), 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 8)

        exc = self.assertRaises(exception.FlushFailed,
                                self.connector.disconnect_volume, props, info)
        self.assertIn('older than os-brick-cas supports', str(exc))
        self.assertEqual([('Active', 8)],
                         [(c.status, self.dirty(c)) for c in self.cores()])
        self.assertEqual(1, len(self.mappings()))

        # v22.6's own per-core flush works; every wb detach still needs
        # '-F -j' (it always flushes), so only an upgrade helps
        self._tool('casadm', '-E', '-i', '2', '-j', str(core.core_id))
        self.assertEqual(0, self.dirty(core))
        self.assertRaises(exception.FlushFailed,
                          self.connector.disconnect_volume, props, info)
        self.host.set_version(None)         # upgraded: -E is gone
        gone = run('casadm', '-E', '-i', '2', '-j', str(core.core_id))
        self.assertEqual((1, 'Unrecognized command -E\n'),
                         (gone.returncode, gone.stderr))
        self.connector.disconnect_volume(props, info)
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()


class MessagesTestCase(base.FunctionalTestCase):
    """casadm's own refusal texts map to typed errors."""

    caches = {1: 'wt'}

    def test_stats_remove_inactive_and_module(self):
        props = self.props(self.image('volume-msg'), 'wt')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        cas = casadm.Casadm()
        self.assertRaises(exception.CacheNotFound, cas.stats, 9)
        self.assertRaises(exception.CoreNotFound, cas.stats, 1, 99)
        exc = self.assertRaises(exception.CoreActive,
                                cas.remove_inactive_core, core)
        self.assertIn("Core is active. To manage the active core use "
                      "'--remove-core' command.", str(exc))
        self.connector.disconnect_volume(props, info)
        self.host.set_module_loaded(False)
        self.assertEqual('Not Loaded',
                         cas.version()['CAS Cache Kernel Module'])
        self.assertRaises(exception.CasModuleNotLoaded, cas.list_caches)
        self.assertEqual(sim_casadm.VERSION, cas.version()['CAS CLI Utility'])


class ListPathsTestCase(base.FunctionalTestCase):
    """-L shows resolved paths without -b, the start paths with it."""

    caches = {1: 'wt'}

    def test_cache_started_by_a_link(self):
        target = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'disk')
        link = target + '-link'
        os.symlink(target, link)
        state = self.host.state()
        state['caches']['1']['device'] = link
        sim_state.write(self.host.state_dir, state)
        plain, by_id = (subprocess.run(
            ['casadm', '-L', '-o', 'csv'] + extra, check=True,
            capture_output=True, text=True).stdout for extra in ([], ['-b']))
        self.assertIn('cache,1,%s,Running,wt,-' % target, plain)
        self.assertIn('cache,1,%s,Running,wt,-' % link, by_id)


REAL = real_samples.REAL
real_sample = real_samples.real_sample
REAL_FSID = 'e1bc46253e2c45a9a5413d8aa4ee3cf9'
#: -P columns whose values come from the real data path (reads, the brd
#: cache's size and metadata, percentages of them): the counter-only
#: simulator has no data path,
#: so these are not compared (the header always is, whole)
DATA_PATH_COLUMNS = re.compile(
    r'^(Cache Size|Metadata Memory Footprint|Occupancy|Free|Clean|Read |'
    r'Write |Pass-Through|Serviced|Total|Reads from|Writes to|Cache read|'
    r'Cache write|Cache total|Core read|Core write|Core total|Dirty \[%\]|'
    r'Inactive (Occupancy|Clean|Dirty \[%\]))')


class RealSamplesReplayTestCase(testtools.TestCase):
    """The real v26.03.2 trial, call by call, against the simulator.

    One simulated host goes through the trial's steps in order: each
    recorded casadm/rbd call is run with the same argv and its exit code,
    stdout and stderr compared exactly (the fsid, /dev/rbdN and scratch
    paths normalised; -P values of the data path aside, see
    DATA_PATH_COLUMNS). What the trial did outside casadm/rbd (dd writes,
    time passing, a process holding a device open) is done through the
    simulator's knobs; STEPS says so per sample, and why a sample is not
    replayed (table output, dmesg, ...).
    """

    #: sample number -> what to do (default: replay it)
    STEPS = {
        13: ('open', '/dev/rbd0'),         # the trial held it with exec 3<
        15: ('close', '/dev/rbd0'),
        19: ('module', True),              # insmod cas_cache.ko
        21: ('skip', 'table output (-V without -o csv) is not simulated'),
        38: ('skip', 'ls/lsblk/udevadm of the guest'),
        39: ('skip', 'table output (-L without -o csv) is not simulated'),
        46: ('dirty', 1024),
        48: ('clock', 2),
        50: ('skip', 'table output (-P without -o csv) is not simulated'),
        55: ('stdin', 'ioclass-core1-pt.csv'),
        57: ('skip', 'dd through a pass-through IO class: no dirty data'),
        59: ('skip', 'IO-class statistics (-P -d) are not simulated'),
        65: ('dirty+open', 1024),          # written, then held open
        67: ('dirty', 1024),
        70: ('dirty+close', 1024),
        75: ('dirty', 1024),
        79: ('dirty', 1024),
        86: ('clock', 4),
        88: ('dirty', 1024),
        93: ('skip', 'table output (-L without -o csv) is not simulated'),
        94: ('clock', 2),
        100: ('skip', 'ls -l /dev/disk/by-id of the guest'),
        106: ('dirty', 1024),
        120: ('dirty', 1024),
        123: ('clock', 1),
        124: ('skip', 'dd through the exported object (no data path)'),
    }

    def setUp(self) -> None:
        super().setUp()
        reason = base.can_use_dev()
        if reason:
            self.skipTest(reason)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.host = self.useFixture(sim_fixture.SimulatedHost(
            caches={}, udev_by_id=True))
        self.host.set_module_loaded(False)
        self.host.create_image('rbd', 'vol1', 256)
        self.host.advance_clock()
        os.makedirs(os.path.join(self.tmp, 'links'))
        self.sim_fsid = rbd_names.normal_fsid(sim_state.SIMULATED_FSID)

    def _normalise(self, text: str) -> str:
        return (text.replace(REAL_FSID, self.sim_fsid)
                .replace('/scratch/', self.tmp + '/'))

    def _link(self, link: str) -> None:
        os.symlink('/dev/rbd0', link)
        self.addCleanup(os.unlink, link)

    def _act(self, action: str, value) -> None:
        if action in ('open', 'close'):
            self.host.set_open(value, action == 'open')
        elif action == 'module':
            self.host.set_module_loaded(value)
        elif action == 'clock':
            self.host.advance_clock(value)
        elif action.startswith('dirty'):
            if action.endswith('close'):
                self.host.set_open('/dev/cas1-1', False)
            self.host.set_dirty(1, 1, value)
            if action.endswith('open'):
                self.host.set_open('/dev/cas1-1')

    def _compare_stats(self, want: str, got: str) -> list[str]:
        want_rows = list(csv.reader(io.StringIO(want)))
        got_rows = list(csv.reader(io.StringIO(got)))
        if [row[:1] for row in want_rows] != [row[:1] for row in got_rows] \
                or want_rows[0] != got_rows[0]:
            return ['header: want %d columns, got %d: %s' % (
                len(want_rows[0]), len(got_rows[0]) if got_rows else 0,
                sorted(set(got_rows[0] if got_rows else []) ^
                       set(want_rows[0])))]
        return ['%s: want %r, got %r' % (name, w, g) for name, w, g in zip(
            want_rows[0], want_rows[1], got_rows[1])
            if w != g and not DATA_PATH_COLUMNS.match(name)]

    def _without_stand_in_row(self, got: subprocess.CompletedProcess
                              ) -> subprocess.CompletedProcess:
        """``casadm -V`` less the one row the stand-in adds on purpose."""
        lines = got.stdout.splitlines(keepends=True)
        self.assertTrue(lines[-1].startswith(stand_in.SIMULATOR_ROW + ','),
                        got.stdout)
        return subprocess.CompletedProcess(
            got.args, got.returncode, ''.join(lines[:-1]), got.stderr)

    def test_replay_v26_03_2(self):
        names = sorted(os.listdir(os.path.join(REAL, 'v26.03.2')))
        self.assertGreater(len(names), 90)
        self._link(os.path.join(self.tmp, 'links', 'rbd-vol1'))
        inputs = os.path.join(REAL, 'v26.03.2-inputs')
        for name in os.listdir(inputs):
            shutil.copy(os.path.join(inputs, name), self.tmp)
        differences, replayed = [], 0
        for number in range(1, 131):
            action = self.STEPS.get(number, ('replay', None))
            [name] = [n for n in names if n.startswith('%03d-' % number)] or \
                [None]
            if action[0] == 'skip':
                continue
            if action[0] not in ('replay', 'stdin'):
                try:
                    self._act(*action)
                except KeyError as exc:     # the state it needs is missing
                    differences.append('step %d: no %s' % (number, exc))
            if name is None:
                continue        # not a casadm/rbd call (dd, modinfo, ...)
            argv, code, out, err = real_sample(name)
            argv = [self._normalise(arg) for arg in argv]
            stdin = None
            if action[0] == 'stdin':
                argv = ['casadm'] + shlex.split(argv[2].split('<')[0])[1:]
                with open(os.path.join(inputs, action[1])) as table:
                    stdin = table.read()
            if number == 36:
                self._link(argv[-1])
            got = subprocess.run(argv, capture_output=True, text=True,
                                 input=stdin, env=os.environ.copy())
            replayed += 1
            if '-V' in argv or '--version' in argv:
                got = self._without_stand_in_row(got)
            want = (code, self._normalise(out), self._normalise(err))
            if '-P' in argv or '--stats' in argv:
                found = self._compare_stats(want[1], got.stdout) if (
                    code == 0) else []
                if (got.returncode, got.stderr) != (code, want[2]) or \
                        (code and got.stdout != want[1]):
                    found.append('%r' % ((got.returncode, got.stdout,
                                          got.stderr),))
            else:
                found = [] if (got.returncode, got.stdout,
                               got.stderr) == want else [
                    'want %r\n     got %r' % (want, (
                        got.returncode, got.stdout, got.stderr))]
            differences += ['%s: %s' % (name, line) for line in found]
        self.assertEqual([], differences, '\n'.join(differences))
        self.assertGreater(replayed, 85)


class CorePoolTestCase(base.FunctionalTestCase):
    """A try-add for a cache that is not running parks the device."""

    udev_by_id = True

    def _pool(self) -> list[str]:
        return casadm_output.parse_core_pool(self._tool(
            'casadm', '-L', '-o', 'csv', '-b'))

    def test_reactivation_refused_when_the_cache_stops_first(self):
        props = self.props(self.image('volume-pooled'), 'wb')
        self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 24)
        self.host.reboot()
        # the operator stops the instance between the attach's -L and its
        # try-add: casadm exits 0 and parks the device in the core pool
        self.host.stop_cache_before('try-add', core.cache_id)

        exc = self.assertRaises(exception.CacheNotRunning,
                                self.connector.connect_volume, props)
        self.assertIn('core pool', str(exc))
        self.assertEqual([], self._pool())
        self.assertEqual(1, len([c for c in self.host.calls('casadm')
                                 if '--remove-detached' in c['argv']]))
        saved = self.host.state()['metadata']['/dev/nvme0n1p2']['cache']
        self.assertEqual(24, saved['cores'][str(core.core_id)]['dirty'])
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])

    def test_attach_releases_a_device_left_in_the_core_pool(self):
        image = self.image('volume-left-in-pool')
        self._tool('rbd', 'map', image, '--pool', base.POOL)
        link = self.host.by_id_link(base.POOL, image)
        self._tool('casadm', '--script', '--add-core', '--try-add',
                   '--cache-id', '9', '--core-id', '1', '--core-device',
                   link)
        self.assertEqual([link], self._pool())
        props = self.props(image, 'wt')

        info = self.connector.connect_volume(props)

        self.assertRegex(info['path'], r'^/dev/cas1-\d+$')
        self.assertEqual([], self._pool())
        self.assertEqual([link], [c.device for c in self.cores()])
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.cores())


class RefusedButFlushedTestCase(base.FunctionalTestCase):
    """-R/-T refused because /dev/casX-Y is open have flushed already."""

    def test_detach_and_stop_refused_while_the_export_is_open(self):
        props = self.props(self.image('volume-open'), 'wb')
        info = self.connector.connect_volume(props)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, 40)
        self.host.set_open(info['path'])

        exc = self.assertRaises(exception.DeviceBusy,
                                self.connector.disconnect_volume, props, info)
        self.assertIn('Device opens or mount are pending', str(exc))
        self.assertEqual([('Active', 0)],
                         [(c.status, self.dirty(c)) for c in self.cores()])
        self.assertEqual(40, self.host.state()['flushed_blocks'])
        self.assertIn((2, core.core_id),
                      opencas_conf.read(self.opencas_conf).cores)
        self.host.set_dirty(core.cache_id, core.core_id, 8)
        stop = run('casadm', '-T', '-i', '2')
        self.assertEqual((1, 'Error while stopping cache 2\nDevice opens or '
                             'mount are pending to this cache\n'),
                         (stop.returncode, stop.stderr))
        self.assertEqual([('Active', 0)],
                         [(c.status, self.dirty(c)) for c in self.cores()])

        self.host.set_open(info['path'], False)
        self.connector.disconnect_volume(props, info)
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assert_clean_host()
