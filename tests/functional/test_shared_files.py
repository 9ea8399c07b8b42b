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

"""Issue 32, point 4: the shared directories are hostile ground for root.

A member of the service group can plant anything in state_path/lifecycle
and the lock directory. Each test below is one attack of the issue's
list; they drive the CLI, the life cycle's start-up resolution and
drift() (doctor's and the exporter's), so they ran unchanged against the
code before :mod:`os_brick_cas.shared_files`.
"""

import errno
import grp
import json
import os
import stat
import threading

import fixtures

from os_brick_cas import lifecycle
from os_brick_cas import locks
from os_brick_cas import opts
from os_brick_cas import rbd_names
from tests.functional import test_lifecycle

HOST = test_lifecycle.HOST
VOL_A = test_lifecycle.VOL_A
#: seconds a reader may take before it counts as hung
HANG = 20


class HostileJournalTestCase(test_lifecycle.LifecycleRegressionBase):

    def setUp(self):
        super().setUp()
        self.victim = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'victim')
        with open(self.victim, 'w') as victim:
            victim.write('precious\n')
        os.chmod(self.victim, 0o644)

    def spec_of(self, core) -> rbd_names.ImageSpec:
        return rbd_names.parse_link_name(os.path.basename(core.device))

    def journal(self) -> str:
        os.makedirs(lifecycle.journal_dir(), exist_ok=True)
        return lifecycle.journal_dir()

    def view(self) -> lifecycle.Cinder:
        return lifecycle.Cinder(HOST, self.cinder.client())

    def assert_victim_untouched(self):
        with open(self.victim) as victim:
            self.assertEqual('precious\n', victim.read())
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.victim).st_mode))

    def quarantined(self) -> list:
        return [d for d in lifecycle.drift(self.casadm)
                if d.kind == lifecycle.QUARANTINE]

    # -- the attacks ------------------------------------------------------
    def test_symlink_at_journal_temporary_is_not_written_through(self):
        core = self.attach(VOL_A, dirty=5)
        name = locks.volume_lock_name(self.spec_of(core)) + '.json'
        # the temporary's name the journal used (path + '.tmp')
        os.symlink(self.victim, os.path.join(self.journal(), name + '.tmp'))
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, out + err)
        self.assert_victim_untouched()

    def test_symlink_at_lock_file_is_not_chmodded(self):
        core = self.attach(VOL_A)
        lock_file = os.path.join(self.tmp, 'os-brick-cas-' +
                                 locks.volume_lock_name(self.spec_of(core)))
        os.unlink(lock_file)
        os.symlink(self.victim, lock_file)
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, out + err)
        self.assert_victim_untouched()
        self.assertTrue(stat.S_ISREG(os.lstat(lock_file).st_mode))

    def test_lock_file_found_is_never_chmodded(self):
        core = self.attach(VOL_A)
        lock_file = os.path.join(self.tmp, 'os-brick-cas-' +
                                 locks.volume_lock_name(self.spec_of(core)))
        os.chmod(lock_file, 0o600)
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, out + err)
        self.assertEqual(0o600, stat.S_IMODE(os.stat(lock_file).st_mode))

    def test_fifo_named_json_hangs_neither_startup_nor_drift(self):
        self.attach(VOL_A)
        fifo = os.path.join(self.journal(), 'rbd-volumes--planted.json')
        os.mkfifo(fifo, 0o660)

        def unblock():
            # a reader blocked in open() gets EOF once a writer came
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        self.addCleanup(unblock)
        results = {}

        def readers():
            results['startup'] = lifecycle.Lifecycle(
                self.casadm).resolve_all(self.view(), lifecycle.deadline(60))
            results['drift'] = lifecycle.drift(self.casadm, self.view())
            results['doctor'] = self.cli('doctor')

        thread = threading.Thread(target=readers, daemon=True)
        thread.start()
        thread.join(HANG)
        self.assertFalse(thread.is_alive(), 'a FIFO in the journal hangs '
                                            'its readers')
        self.assertEqual({}, results['startup'])
        [bad] = [d for d in results['drift']
                 if d.kind == lifecycle.QUARANTINE]
        self.assertIn('not-regular', bad.volume)
        self.assertFalse(os.path.lexists(fifo))
        code, out, err = results['doctor']
        self.assertEqual(2, code, out)
        self.assertIn('FAIL %s' % bad.volume, out)

    def test_short_write_is_not_renamed_into_place(self):
        core = self.attach(VOL_A, dirty=5)
        spec = self.spec_of(core)
        volume = lifecycle.Volume(spec, VOL_A)
        machine = lifecycle.Lifecycle(self.casadm)
        machine.drain(volume, self.view(), lifecycle.deadline(60),
                      holder=lifecycle.LIVE_MIGRATION, instance='i-1')
        journal = os.path.realpath(lifecycle.journal_dir())
        real_write = os.write
        started = set()

        def disk_full(fd, data):
            # ENOSPC for journal files: the first write is short, the
            # next finds no space
            target = os.readlink('/proc/self/fd/%d' % fd)
            if not target.startswith(journal + os.sep):
                return real_write(fd, data)
            if fd in started:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            started.add(fd)
            return real_write(fd, bytes(data)[:len(data) // 2])

        with fixtures.MonkeyPatch('os.write', disk_full):
            try:
                # nova's pre-check retried: the drain is journaled again
                machine.drain(volume, self.view(), lifecycle.deadline(60),
                              holder=lifecycle.LIVE_MIGRATION,
                              instance='i-1')
            except OSError:
                pass
        self.assertTrue(started, 'no journal write was attempted')
        record = lifecycle.read_record(spec)
        self.assertEqual(lifecycle.LIVE_MIGRATION, record.holder)
        self.assertEqual(lifecycle.DRAINED, record.state)
        self.assertEqual([], self.quarantined())
        self.assertEqual([], [n for n in os.listdir(journal)
                              if n.endswith('.tmp')])
        # and the hold still ends as it should
        self.assertTrue(machine.undrain(volume, self.view(),
                                        lifecycle.deadline(60),
                                        holder=lifecycle.LIVE_MIGRATION))
        self.assertFalse(self.pinned(core))

    def test_record_of_another_shape_does_not_stop_startup(self):
        self.attach(VOL_A)
        name = 'rbd-volumes--volume-newer.json'
        path = os.path.join(self.journal(), name)
        with open(path, 'w') as record:
            # a newer release's record: another spec shape, version 2
            json.dump({'version': 2, 'state': 'draining',
                       'spec': {'pool': 'volumes', 'namespace': '',
                                'image': 'volume-newer', 'cluster': 'c1'},
                       'volume_id': 'newer'}, record)
        with fixtures.FakeLogger() as log:
            unresolved = lifecycle.Lifecycle(self.casadm).resolve_all(
                self.view(), lifecycle.deadline(60))
        self.assertEqual({}, unresolved)
        self.assertIn(name, log.output)
        self.assertFalse(os.path.lexists(path))
        [bad] = self.quarantined()
        self.assertTrue(bad.volume.startswith(os.path.join(
            lifecycle.journal_dir(), 'quarantine', name)), bad.volume)
        self.assertTrue(bad.volume.endswith('newer-version'), bad.volume)


class RecordValidationTestCase(test_lifecycle.LifecycleRegressionBase):
    """Every kind of bad record is quarantined and reported, none skipped."""

    def plant(self, name: str, make) -> str:
        os.makedirs(lifecycle.journal_dir(), exist_ok=True)
        path = os.path.join(lifecycle.journal_dir(), name)
        make(path)
        return path

    def write(self, content: bytes):
        def make(path):
            with open(path, 'wb') as out:
                out.write(content)
        return make

    def assert_quarantined(self, reason: str, make) -> None:
        name = 'rbd-volumes--volume-%s.json' % reason
        path = self.plant(name, make)
        self.assertEqual([], list(lifecycle.records()))
        found = [d for d in lifecycle.drift(self.casadm)
                 if d.kind == lifecycle.QUARANTINE]
        self.assertEqual(1, len(found), found)
        self.assertIn(name, found[0].volume)
        self.assertTrue(found[0].volume.endswith('.' + reason),
                        found[0].volume)
        self.assertFalse(os.path.lexists(path))

    def valid(self, image: str) -> dict:
        return {'version': 1, 'state': 'drained', 'holder': 'snapshot',
                'spec': {'pool': 'volumes', 'namespace': '', 'image': image,
                         'fsid': None}}

    def test_truncated(self):
        self.assert_quarantined('not-json', self.write(
            json.dumps(self.valid('volume-not-json')).encode()[:30]))

    def test_not_an_object(self):
        self.assert_quarantined('bad-schema', self.write(b'[1, 2]\n'))

    def test_unknown_state(self):
        record = self.valid('volume-bad-schema')
        record['state'] = 'exploded'
        self.assert_quarantined('bad-schema', self.write(
            json.dumps(record).encode()))

    def test_too_large(self):
        self.assert_quarantined('too-large', self.write(b' ' * 70000))

    def test_symlink_to_a_valid_record(self):
        elsewhere = os.path.join(self.tmp, 'elsewhere.json')
        self.write(json.dumps(self.valid('volume-symlink')).encode())(
            elsewhere)
        self.assert_quarantined('symlink',
                                lambda path: os.symlink(elsewhere, path))
        self.assertTrue(os.path.exists(elsewhere))

    def test_hard_link(self):
        elsewhere = os.path.join(self.tmp, 'elsewhere.json')
        self.write(json.dumps(self.valid('volume-hard-link')).encode())(
            elsewhere)
        self.assert_quarantined('hard-link',
                                lambda path: os.link(elsewhere, path))

    def test_foreign_owner(self):
        if os.geteuid() != 0:
            self.skipTest('needs root to give a file away')

        def make(path):
            self.write(json.dumps(self.valid(
                'volume-foreign-owner')).encode())(path)
            os.chown(path, 65534, 65534)
        self.assert_quarantined('foreign-owner', make)

    def test_file_named_for_another_volume(self):
        self.assert_quarantined('bad-schema', self.write(json.dumps(
            self.valid('volume-someone-else')).encode()))

    def test_record_before_versioning_is_read(self):
        record = self.valid('volume-old')
        del record['version']
        spec = rbd_names.ImageSpec('volumes', '', 'volume-old')
        self.plant(locks.volume_lock_name(spec) + '.json',
                   self.write(json.dumps(record).encode()))
        [found] = lifecycle.records()
        self.assertEqual('snapshot', found.holder)
        self.assertEqual('volume-old', found.spec.image)


class SharedDirectoriesTestCase(test_lifecycle.LifecycleRegressionBase):
    """Whoever comes first creates them root:<service group> 2770."""

    GROUP = 65534

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, 'state')
        self.conf.config(group=opts.GROUP, state_path=self.state,
                         lock_path=os.path.join(self.state, 'locks'),
                         service_group=str(self.GROUP))

    def shared_dir_findings(self) -> list:
        code, out, err = self.cli('doctor', '--format', 'json')
        return [(f['level'], f['message'])
                for f in json.loads(out)['findings']
                if f['check'] == 'shared-dirs']

    def test_cli_first_creates_them_as_documented_and_doctor_checks(self):
        if os.geteuid() != 0:
            self.skipTest('needs root to create root-owned directories')
        self.attach(VOL_A, dirty=5)
        code, out, err = self.cli('drain', '--volume', VOL_A)
        self.assertEqual(0, code, out + err)
        names = ('lifecycle', 'events', 'locks')
        for name in names:
            info = os.stat(os.path.join(self.state, name))
            self.assertEqual((0, self.GROUP, 0o2770),
                             (info.st_uid, info.st_gid,
                              stat.S_IMODE(info.st_mode)), name)
        findings = self.shared_dir_findings()
        self.assertEqual(['OK'] * 3, [level for level, _ in findings],
                         findings)
        # a directory made by hand the old way: doctor says how to fix it
        events = os.path.join(self.state, 'events')
        os.chown(events, 0, 0)
        os.chmod(events, 0o755)
        [bad] = [f for f in self.shared_dir_findings() if f[0] != 'OK']
        self.assertEqual('FAIL', bad[0])
        self.assertIn('chown root:%s %s && chmod 2770 %s' % (
            shared_dir_group(self.GROUP), events, events), bad[1])


def shared_dir_group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
