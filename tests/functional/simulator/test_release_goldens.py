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

"""The stand-in at each release against that release's kernel-tier goldens.

tests/data/real-casadm/<release>/<name>.txt are casadm calls the real-kernel
tier recorded (tests/kernel, ``OS_BRICK_CAS_KERNEL_RECORD=1``) on Open CAS
built from that release. Each test below brings the stand-in, told to be
that release (``set_version``), into the same state through the product
and the stand-in tools, makes the same call and compares exit code, stdout
and stderr exactly. Only names that differ between hosts are normalised
(cache and core devices, by-id links); of a ``-P`` only the column titles
and the number of cells are compared (counters and timings differ).
"""

import csv
import os
import re
import subprocess

from tests.functional import base
from tests.functional.simulator import real_samples

HAND_LINK = '/dev/disk/by-id/rbd-a-handmade'
#: recorded release directory -> what its ``casadm -V`` reports
RELEASES = {'v24.9': '24.09.0.0000.release',
            'v25.12.2': '25.12.2.0000.release',
            'v26.03.2': '26.03.2.0000.release'}
_NAMES = ((re.compile(r'/dev/disk/by-id/rbd-cas-[^,\s]+'), '<core-link>'),
          (re.compile(r'/dev/rbd\d+'), '<rbd>'),
          (re.compile(r'/dev/(ram\d+|nvme\d+n1p\d+|'
                      r'disk/by-id/nvme-sim-part\d+)'), '<cache-disk>'))
_CORE_IDS = re.compile(r'core_id:eq:\d+')


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True,
                          env=os.environ.copy())


def normal(text: str) -> str:
    for pattern, name in _NAMES:
        text = pattern.sub(name, text)
    return text


class ReleaseGoldens(object):
    """Replays the goldens of :attr:`release` (a test case per release)."""

    caches = {1: 'wt', 2: 'wb', 4: 'wo'}
    udev_by_id = True
    release = ''

    def setUp(self) -> None:
        super().setUp()
        if not os.path.isdir(os.path.join(real_samples.REAL, self.release)):
            self.fail('no goldens recorded for %s' % self.release)
        self.host.set_version(RELEASES[self.release])

    def golden(self, name: str) -> tuple[list[str], int, str, str]:
        return real_samples.real_sample(name + '.txt', self.release)

    def assert_same(self, name: str, argv: list[str] = None) -> None:
        """The stand-in's answer to the golden's argv (or *argv*) is it."""
        recorded, code, out, err = self.golden(name)
        done = run(*(argv or recorded))
        self.assertEqual((code, normal(out), normal(err)),
                         (done.returncode, normal(done.stdout),
                          normal(done.stderr)), name)

    def assert_same_columns(self, name: str, core) -> None:
        """``-P`` of *core*: the golden's column titles, as many cells."""
        want = list(csv.reader(self.golden(name)[2].splitlines()))
        got = list(csv.reader(run(
            'casadm', '-P', '-i', str(core.cache_id), '-j',
            str(core.core_id), '-o', 'csv').stdout.splitlines()))
        self.assertEqual(want[0], got[0], name)
        self.assertEqual([len(row) for row in want],
                         [len(row) for row in got], name)

    def keep_only(self, *cache_ids: int) -> None:
        """Stop the other instances (the guest ran only these)."""
        for cache_id in set(self.caches) - set(cache_ids):
            self.assertEqual(0, run('casadm', '-T', '-i',
                                    str(cache_id)).returncode)

    def attach(self, label: str, mode: str) -> tuple[dict, dict]:
        props = self.props(self.image('volume-%s' % label), mode)
        return props, self.connector.connect_volume(props)

    def test_list_of_an_attached_core(self) -> None:
        self.keep_only(1)
        props, info = self.attach('udev', 'wt')
        self.assert_same('list-csv-core')
        self.assert_same('list-csv-b-core')
        self.connector.disconnect_volume(props, info)

    def test_dirty_core_stats(self) -> None:
        for mode, cache_id in (('wb', 2), ('wo', 4)):
            props, info = self.attach(mode, mode)
            [core] = self.cores()
            self.host.set_dirty(cache_id, core.core_id, 256)
            self.assert_same_columns('stats-core-csv-%s-dirty' % mode, core)
            self.connector.disconnect_volume(props, info)

    def test_core_open_is_not_removed(self) -> None:
        props, info = self.attach('open', 'wb')
        self.host.set_open(info['path'])
        self.assert_same('remove-core-open')
        self.host.set_open(info['path'], False)
        self.connector.disconnect_volume(props, info)

    def test_core_added_by_a_hand_made_link(self) -> None:
        self.host.create_image(base.POOL, 'held', 16)
        device = run('rbd', 'map', 'held', '--pool',
                     base.POOL).stdout.strip()
        os.symlink(device, HAND_LINK)
        self.addCleanup(os.unlink, HAND_LINK)
        self.assert_same('add-core-hand-link')
        self.assertEqual(0, run('casadm', '-R', '-i', '1', '-j',
                                '1').returncode)

    def test_crash_and_load(self) -> None:
        self.keep_only(2)
        # started by the path opencas.conf lists, as the guest does
        device = '/dev/disk/by-id/nvme-sim-part2'
        for argv in (('-T', '-i', '2'),
                     ('-S', '-i', '2', '-d', device, '-c', 'wb', '--force')):
            self.assertEqual(0, run('casadm', *argv).returncode)
        props, info = self.attach('reboot', 'wb')
        [core] = self.cores()
        self.host.set_dirty(2, core.core_id, 256)
        self.assert_same('stop-cache-no-flush')
        for mapping in self.mappings():
            self.assertEqual(0, run('rbd', 'unmap',
                                    mapping['device']).returncode)
        self.assert_same('start-cache-load-with-id', [
            'casadm', '-S', '-i', '2', '-d', device, '-l'])
        loaded = run('casadm', '-S', '-d', device, '-l')
        self.assertEqual(0, loaded.returncode, loaded.stderr)
        self.assert_same('list-csv-b-inactive')
        [inactive] = self.cores()
        self.assert_same_columns('stats-core-csv-inactive', inactive)
        self.assert_same('flush-cache-incomplete')
        self.connector.disconnect_volume(props, None)

    def test_drained_core(self) -> None:
        from os_brick_cas import lifecycle
        from os_brick_cas import volume as volume_mod
        props, info = self.attach('drain', 'wb')
        [core] = self.cores()
        self.host.set_dirty(2, core.core_id, 256)
        spec = volume_mod.from_connection_properties(props).spec
        machine = lifecycle.Lifecycle(self.connector.volume_cache.casadm)
        machine.drain(lifecycle.volume_of(spec),
                      lifecycle.Cinder('golden-host', None, in_use=False),
                      lifecycle.deadline(60))
        self.assert_same_columns('stats-core-csv-drained', core)
        self.assert_same('io-class-list-drained')
        self.connector.disconnect_volume(props, info)

    def test_runtime_params(self) -> None:
        """tests/kernel/test_params.py's -G calls, same settings."""
        names = sorted(
            name[:-len('.txt')] for name in os.listdir(os.path.join(
                real_samples.REAL, self.release))
            if name.startswith('get-param-'))
        self.assertEqual(6, len(names), names)
        self.keep_only(1)
        props, info = self.attach('params', 'wt')
        [core] = self.cores()
        for argv in (('-X', '-n', 'cleaning', '-i', '1', '-p', 'nop'),
                     ('-X', '-n', 'seq-cutoff', '-i', '1', '-j',
                      str(core.core_id), '-p', 'never')):
            self.assertEqual(0, run('casadm', *argv).returncode)
        for name in names:
            self.assert_same(name)
        self.connector.disconnect_volume(props, info)


class RenamedClass0(object):
    """A class 0 not named ``unclassified`` (recorded on v24.9, v25.12.2)."""

    def test_io_class_0_renamed(self) -> None:
        table = os.path.join(self.tmp, 'ioclass.csv')
        with open(table, 'w') as conf:
            conf.write('IO class id,IO class name,Eviction priority,'
                       'Allocation\n0,default,255,1\n'
                       '1,core_id:eq:1&done,0,0\n')
        self.keep_only(1)
        self.assert_same('io-class-load-class0-renamed', [
            'casadm', '--io-class', '--load-config', '--cache-id', '1',
            '--file', table])
        self.assert_same('io-class-list-after-class0-renamed')


class SharedClassStats(object):
    """Per-class statistics of shared cores (v26.03.2: test_noisy_neighbour).

    The guest's table: class 0 at what the shares leave, then the quiet
    volume's class (40 %) and the noisy one's (30 %), both pinned. The
    configuration cells (id, rule, priority, Max size) must be the real
    module's; of the counters, the titles and the number of cells.
    """

    def assert_same_class_stats(self, name: str, argv: list[str]) -> None:
        recorded, code, out, err = self.golden(name)
        done = run(*argv)
        want = list(csv.reader(_CORE_IDS.sub('core_id:eq:N', out)
                               .splitlines()))
        got = list(csv.reader(_CORE_IDS.sub('core_id:eq:N', done.stdout)
                              .splitlines()))
        self.assertEqual((code, err), (done.returncode, done.stderr), name)
        self.assertEqual(want[0], got[0], name)
        self.assertEqual([row[:4] for row in want[1:]],
                         [row[:4] for row in got[1:]], name)
        self.assertEqual([len(row) for row in want],
                         [len(row) for row in got], name)

    def test_shared_class_stats(self) -> None:
        self.keep_only(1)
        attached = []
        for label, share in (('quiet', 40), ('noisy', 30)):
            props = self.props(self.image('volume-%s' % label), 'wt',
                               cache_share=share)
            attached.append((props, self.connector.connect_volume(props)))
        # the noisy volume's class: the guest's argv names it
        recorded = self.golden('stats-io-class-csv-capped')[0]
        self.assert_same_class_stats('stats-io-class-csv-capped', recorded)
        self.assert_same_class_stats('stats-io-class-csv-all', [
            'casadm', '--stats', '--cache-id', '1', '--output-format',
            'csv', '--io-class-id'])
        for props, info in reversed(attached):
            self.connector.disconnect_volume(props, info)


class V24_9TestCase(RenamedClass0, ReleaseGoldens,
                    base.FunctionalTestCase):
    release = 'v24.9'


class V25_12_2TestCase(RenamedClass0, ReleaseGoldens,
                       base.FunctionalTestCase):
    release = 'v25.12.2'


class V26_03_2TestCase(SharedClassStats, ReleaseGoldens,
                       base.FunctionalTestCase):
    release = 'v26.03.2'
