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

"""What Ceph's own fencing does when an old owner of an image returns.

Measured on the real one-node cluster (issue 13, point 2). Each "host" is
a librbd client in its own process (tests/ceph/rbd_client.py: its own
rados instance and address); the image has the exclusive-lock feature
(cluster default features, as cinder creates volumes). The tests assert
what was observed, so a Ceph release that behaves differently fails here:

a) A frozen owner (SIGSTOP) keeps its lock until its watch times out
   (osd_client_watch_timeout, lowered to 5 s on the OSD for this module,
   default 30 s). Meanwhile B's write blocks; then librbd in B
   blocklists A's address (for 1 h) and breaks the lock; B's write lands.
b) A resumes: every call through its old client fails with ESHUTDOWN
   (errno 108, ConnectionShutdown); B's data survives.
c) A *new* client on A's host (a re-map) is not blocklisted: it asks B
   for the lock, B hands it over, and its stale write overwrites B's
   data. Nobody is blocklisted. Ceph does not stop a returning host that
   maps the image anew - os-brick-cas's ownership record must.
d) Only an owner that holds the lock explicitly (rbd_lock_acquire, no
   automatic transitions) refuses a new client: its write fails at once
   with EROFS.
"""

import datetime
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any
import uuid

import testtools

from tests.ceph import base
from tests import real_ceph

CLIENT = os.path.join(os.path.dirname(__file__), 'rbd_client.py')
#: the OSD's watch timeout while this module runs (default 30 s)
WATCH_TIMEOUT = 5
BLOCK = 4096
ESHUTDOWN = 108
EROFS = 30


def digest(byte: str) -> str:
    return hashlib.sha256(byte.encode() * BLOCK).hexdigest()


class RbdClient:
    """A librbd client process holding the image open read-write."""

    def __init__(self, test: testtools.TestCase, conf: str,
                 image: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, CLIENT, conf, base.POOL, image],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        test.addCleanup(self.stop)
        opened = self.reply(30)
        test.assertTrue(opened['ok'], opened)
        self.addr: str = opened['addrs']

    def send(self, op: str, **args: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(dict(args, op=op)) + '\n')
        self.proc.stdin.flush()

    def reply(self, timeout: float) -> dict:
        """The next reply; {'timeout': True} if none came in *timeout*."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return {'ok': False, 'timeout': True}
        line = self.proc.stdout.readline()
        if not line:
            return {'ok': False, 'exited': self.proc.poll()}
        return json.loads(line)

    def call(self, op: str, timeout: float = 30, **args: Any) -> dict:
        self.send(op, **args)
        return self.reply(timeout)

    def write(self, byte: str, offset: int = 0, timeout: float = 30) -> dict:
        return self.call('write', timeout, offset=offset, length=BLOCK,
                         byte=ord(byte))

    def freeze(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Close the image cleanly if the client still can, else kill."""
        if self.proc.poll() is not None:
            return
        self.resume()
        self.send('quit')
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class CephFencingTestCase(testtools.TestCase):

    def setUp(self) -> None:
        super().setUp()
        real_ceph.skip_or_fail(self)
        self.cluster = base.shared_cluster()
        self.cluster.ceph('config', 'set', 'osd', 'osd_client_watch_timeout',
                          str(WATCH_TIMEOUT))
        self.addCleanup(self.cluster.ceph, 'config', 'rm', 'osd',
                        'osd_client_watch_timeout')
        self.image = 'fence-%s' % uuid.uuid4().hex[:8]
        self.cluster.rbd('create', '%s/%s' % (base.POOL, self.image),
                         '--size', '8M')
        self.addCleanup(self._remove_image)
        info = json.loads(self.cluster.rbd(
            'info', '--format', 'json', '%s/%s' % (base.POOL, self.image)))
        self.assertIn('exclusive-lock', info['features'])

    def _remove_image(self) -> None:
        """Remove the image once its clients are gone.

        Clients are closed first (cleanups run in reverse); a killed
        client's watch lingers up to the watch timeout.
        """
        end = time.monotonic() + WATCH_TIMEOUT + 10
        while True:
            try:
                self.cluster.rbd('rm', '%s/%s' % (base.POOL, self.image))
                return
            except RuntimeError:
                if time.monotonic() > end:
                    raise
                time.sleep(1)

    def client(self) -> RbdClient:
        return RbdClient(self, self.cluster.conf, self.image)

    # -- what the cluster says ---------------------------------------------
    def blocklist(self) -> dict[str, float]:
        """Blocklisted address -> seconds until its entry expires."""
        out = self.mon_command({'prefix': 'osd blocklist ls',
                                'format': 'json'})
        # Pacific prints two JSON arrays back to back: the address
        # blocklist, then the (new in 16.2) range blocklist
        entries, _ = json.JSONDecoder().raw_decode(out.decode())
        now = datetime.datetime.now(datetime.timezone.utc)
        found = {}
        for entry in entries:
            until = datetime.datetime.strptime(entry['until'],
                                               '%Y-%m-%dT%H:%M:%S.%f%z')
            found[entry['addr']] = (until - now).total_seconds()
        return found

    def mon_command(self, command: dict) -> bytes:
        """A read-only mon command's output, through librados.

        The one-mon test cluster was seen to refuse a fresh client's
        command once with EPERM "wrong fsid" (the CLI's "problem getting
        command descriptions" is the same refusal); that exact answer is
        retried briefly, nothing else is.
        """
        import rados
        for _ in range(4):
            with rados.Rados(conffile=self.cluster.conf) as cluster:
                ret, out, status = cluster.mon_command(
                    json.dumps(command), b'', timeout=30)
            if not (ret == -1 and 'wrong fsid' in status):
                break
            time.sleep(1)
        self.assertEqual(0, ret, status)
        return out

    def locker_addrs(self) -> list[str]:
        lockers = json.loads(self.cluster.rbd(
            'lock', 'ls', '--format', 'json',
            '%s/%s' % (base.POOL, self.image)))
        return [locker['address'] for locker in lockers]

    def ceph_digest(self) -> str:
        """sha256 of the first block as a fresh read-only librbd reads it."""
        return hashlib.sha256(self.cluster_read()).hexdigest()

    def cluster_read(self) -> bytes:
        import rados
        import rbd
        with rados.Rados(conffile=self.cluster.conf) as cluster, \
                cluster.open_ioctx(base.POOL) as ioctx, \
                rbd.Image(ioctx, self.image, read_only=True) as img:
            return img.read(0, BLOCK)

    def unblock(self, addr: str) -> None:
        self.addCleanup(self.cluster.ceph, 'osd', 'blocklist', 'rm', addr)

    # -- the shared first half: a frozen owner is taken over ---------------
    def take_over_frozen_owner(self) -> tuple[RbdClient, RbdClient, dict]:
        """A writes and freezes; B's write; returns (A, B, B's reply)."""
        host_a = self.client()
        self.assertTrue(host_a.write('A')['ok'])
        self.assertTrue(host_a.call('owner')['owner'])
        self.assertEqual([host_a.addr], self.locker_addrs())
        host_a.freeze()
        self.unblock(host_a.addr)
        host_b = self.client()
        host_b.send('write', offset=0, length=BLOCK, byte=ord('B'))
        # B blocks: A's watch is still registered, the lock still A's
        waiting = host_b.reply(WATCH_TIMEOUT / 2)
        self.assertTrue(waiting.get('timeout'), waiting)
        self.assertEqual([host_a.addr], self.locker_addrs())
        self.assertNotIn(host_a.addr, self.blocklist())
        written = host_b.reply(WATCH_TIMEOUT + 20)
        self.assertTrue(written['ok'], written)
        return host_a, host_b, written

    # -- the scenarios ------------------------------------------------------
    def test_a_frozen_owner_is_blocklisted_after_its_watch_times_out(
            self) -> None:
        host_a, host_b, written = self.take_over_frozen_owner()
        # B's write waited for the watch timeout, not longer than ~2x it
        self.assertGreaterEqual(written['seconds'], WATCH_TIMEOUT / 2)
        self.assertLess(written['seconds'], 2 * WATCH_TIMEOUT + 5)
        self.assertTrue(host_b.call('owner')['owner'])
        self.assertEqual([host_b.addr], self.locker_addrs())
        listed = self.blocklist()
        self.assertIn(host_a.addr, listed)
        self.assertNotIn(host_b.addr, listed)
        # the lock breaker's default: the OSD's 1 h blocklist expiry
        self.assertGreater(listed[host_a.addr], 3500)
        self.assertLessEqual(listed[host_a.addr], 3600)

    def test_b_returning_old_client_is_refused_and_newer_data_survives(
            self) -> None:
        host_a, host_b, _ = self.take_over_frozen_owner()
        host_a.resume()
        for op, args in (('write', {'offset': 0, 'length': BLOCK,
                                    'byte': ord('a')}),
                         ('read', {'offset': 0, 'length': BLOCK}),
                         ('owner', {})):
            refused = host_a.call(op, **args)
            self.assertFalse(refused['ok'], refused)
            self.assertEqual(ESHUTDOWN, refused['errno'], refused)
            self.assertEqual('ConnectionShutdown', refused['error'])
        self.assertEqual(digest('B'), self.ceph_digest())
        self.assertEqual(digest('B'),
                         host_b.call('read', offset=0,
                                     length=BLOCK)['sha256'])
        self.assertTrue(host_b.call('owner')['owner'])

    def test_c_new_client_of_returning_host_overwrites_newer_data(
            self) -> None:
        host_a, host_b, _ = self.take_over_frozen_owner()
        host_a.resume()
        self.assertEqual(ESHUTDOWN, host_a.write('a')['errno'])
        # the returning host maps the image anew and flushes stale data
        remap = self.client()
        stale = remap.write('A')
        self.assertTrue(stale['ok'], stale)
        self.assertLess(stale['seconds'], WATCH_TIMEOUT)
        self.assertTrue(remap.call('owner')['owner'])
        self.assertFalse(host_b.call('owner')['owner'])
        self.assertEqual([remap.addr], self.locker_addrs())
        listed = self.blocklist()
        self.assertNotIn(remap.addr, listed)
        self.assertNotIn(host_b.addr, listed)
        # B's newer data is gone: Ceph let the stale write through
        self.assertEqual(digest('A'), self.ceph_digest())
        # and the lock goes back on B's next write: cooperative, no fence
        self.assertTrue(host_b.write('B')['ok'])
        self.assertEqual([host_b.addr], self.locker_addrs())

    def test_d_explicitly_held_lock_refuses_a_new_client(self) -> None:
        host_b = self.client()
        self.assertTrue(host_b.call('lock_acquire')['ok'])
        self.assertTrue(host_b.write('B')['ok'])
        remap = self.client()
        refused = remap.write('A')
        self.assertFalse(refused['ok'], refused)
        self.assertEqual(EROFS, refused['errno'], refused)
        self.assertLess(refused['seconds'], WATCH_TIMEOUT)
        self.assertTrue(host_b.call('owner')['owner'])
        self.assertFalse(remap.call('owner')['owner'])
        self.assertNotIn(remap.addr, self.blocklist())
        self.assertEqual(digest('B'), self.ceph_digest())
