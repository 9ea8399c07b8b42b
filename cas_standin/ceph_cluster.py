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

"""A real one-mon, one-osd Ceph cluster on loopback, for the Ceph tier.

Debian's ceph-mon/ceph-osd run from a temporary directory with memstore,
no authentication, pool size 1 and a non-default monitor port. Both
daemons are stopped by their pids on cleanup, also when a test failed.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Optional
import uuid

import fixtures
import tenacity

from cas_standin import state as state_mod

#: seconds one Ceph command may take; a TCG guest on a loaded machine
#: needs more than the 60 s enough elsewhere (tools/kernel/guest.sh sets it)
COMMAND_TIMEOUT = float(os.environ.get('OS_BRICK_CAS_CEPH_TIMEOUT', '60'))

#: the interpreter with Ceph's python3-rados (Debian's, not the venv's)
SYSTEM_PYTHON = '/usr/bin/python3'
SETUP_COMMANDS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              'ceph_setup_commands.py')

REQUIRED_TOOLS = ('ceph-mon', 'ceph-osd', 'ceph', 'monmaptool',
                  'ceph-authtool', 'rbd', 'rbd-fuse', 'losetup',
                  'fusermount')


def missing_tools() -> list[str]:
    """Ceph tools this machine lacks (tools/install-ceph.sh installs)."""
    return [tool for tool in REQUIRED_TOOLS if not shutil.which(tool)]


def run(*argv: str, timeout: float = COMMAND_TIMEOUT) -> str:
    """Run a Ceph/loop/FUSE tool; its stdout, or RuntimeError with output."""
    done = subprocess.run(list(argv), capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode:
        raise RuntimeError('%s failed (%d): %s%s' % (
            ' '.join(argv), done.returncode, done.stdout, done.stderr))
    return done.stdout


def _still_watched(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and 'image has watchers' in str(exc)


@tenacity.retry(retry=tenacity.retry_if_exception(_still_watched),
                stop=tenacity.stop_after_delay(45),
                wait=tenacity.wait_fixed(1), reraise=True)
def remove_image(conf: str, spec: str) -> None:
    """``rbd rm POOL/IMAGE``, waiting out a watch its last user left.

    A FUSE or librbd client that has just closed the image can hold its
    watch a little longer on a loaded machine; a crashed one until the
    30-s watch time-out. "image has watchers" is retried for 45 s.
    """
    run(real_rbd(), '-c', conf, 'rm', spec)


def _mon_refused(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and (
        'problem getting command descriptions from mon' in str(exc))


def real_rbd() -> str:
    """Ceph's own rbd CLI: the first on PATH that is not a stand-in."""
    for entry in os.environ.get('PATH', '').split(os.pathsep):
        candidate = os.path.join(entry, 'rbd')
        if not (os.path.isfile(candidate) and
                os.access(candidate, os.X_OK)):
            continue
        with open(candidate, 'rb') as tool:
            if state_mod.ENV.encode() not in tool.read(4096):
                return candidate
    raise RuntimeError("Ceph's rbd CLI not found on PATH")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


CONF_TEMPLATE = """[global]
fsid = {fsid}
mon host = v1:127.0.0.1:{port}
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd objectstore = memstore
# the fixture places the osd in the CRUSH map itself; an osd doing it at
# start can race its first monmap and fail with 'wrong fsid'
osd crush update on start = false
osd class update on start = false
memstore device bytes = {memstore_bytes}
paxos propose interval = 0.05
run dir = {root}/run
admin socket = {root}/run/$name.$pid.asok
pid file = {root}/run/$name.pid
log file = {root}/log/$name.log
mon data = {root}/mon/$name
osd data = {root}/osd/$name
keyring = {root}/keyring
"""


class CephCluster(fixtures.Fixture):
    """Start the cluster in a temp dir; ``conf`` is its ceph.conf path."""

    def __init__(self, pool: str = 'volumes',
                 memstore_mb: int = 1024) -> None:
        super().__init__()
        self.pool = pool
        self.memstore_mb = memstore_mb
        self.root = ''
        self.conf = ''
        self.port = 0
        self._pids: list[int] = []

    def _setUp(self) -> None:
        # an explicit parent: test bases (cinder's NestedTempfile) point
        # tempfile at a per-test directory, which a shared cluster outlives
        parent = os.environ.get('OS_BRICK_CAS_CEPH_DIR', '/tmp')
        self.root = tempfile.mkdtemp(prefix='os-brick-cas-ceph-',
                                     dir=parent)
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.port = _free_port()
        for sub in ('run', 'log', 'mon', 'osd'):
            os.mkdir(os.path.join(self.root, sub))
        fsid = str(uuid.uuid4())
        self.conf = os.path.join(self.root, 'ceph.conf')
        with open(self.conf, 'w') as conf_file:
            conf_file.write(CONF_TEMPLATE.format(
                fsid=fsid, port=self.port, root=self.root,
                memstore_bytes=self.memstore_mb * 2 ** 20))
        self.addCleanup(self.stop)
        keyring = os.path.join(self.root, 'keyring')
        run('ceph-authtool', '--create-keyring', keyring,
            '--gen-key', '-n', 'mon.', '--cap', 'mon', 'allow *')
        monmap = os.path.join(self.root, 'monmap')
        run('monmaptool', '--create', '--fsid', fsid, '--addv', 'a',
            '[v1:127.0.0.1:%d]' % self.port, monmap)
        run('ceph-mon', '-c', self.conf, '--mkfs', '-i', 'a',
            '--monmap', monmap)
        run('ceph-mon', '-c', self.conf, '-i', 'a')
        self._remember_pids()
        osd_uuid = str(uuid.uuid4())
        # the osd's id, its CRUSH place and the pool: one client session
        osd_id = run(SYSTEM_PYTHON, SETUP_COMMANDS, self.conf, osd_uuid,
                     self.pool).strip()
        os.makedirs(os.path.join(self.root, 'osd', 'osd.%s' % osd_id))
        run('ceph-osd', '-c', self.conf, '-i', osd_id, '--mkfs',
            '--osd-uuid', osd_uuid)
        run('ceph-osd', '-c', self.conf, '-i', osd_id)
        self._remember_pids()
        self._wait_usable()

    def ceph(self, *args: str) -> str:
        """The ceph CLI on this cluster.

        A young one-mon cluster on a loaded machine now and then refuses
        a new client's command ("problem getting command descriptions
        from mon", EPERM); that exact refusal is retried a few times.
        """
        for attempt in tenacity.Retrying(
                retry=tenacity.retry_if_exception(_mon_refused),
                stop=tenacity.stop_after_attempt(4),
                wait=tenacity.wait_fixed(2), reraise=True):
            with attempt:
                return run('ceph', '-c', self.conf, *args)
        raise AssertionError('unreachable')

    def rbd(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """Ceph's own rbd CLI (never a stand-in earlier on PATH)."""
        return run(real_rbd(), '-c', self.conf, *args, timeout=timeout)

    def _wait_usable(self, deadline: float = COMMAND_TIMEOUT) -> None:
        """Until an image can be created and removed in the pool."""
        end = time.monotonic() + deadline
        probe = '%s/os-brick-cas-probe' % self.pool
        last: Optional[Exception] = None
        while time.monotonic() < end:
            # bounded by what is left: while the pool's placement groups
            # are still being created a create waits for them, and one
            # cut short may still have made the image (a TCG guest on a
            # loaded machine: "already exists" at every retry after it)
            left = max(1.0, end - time.monotonic())
            try:
                try:
                    self.rbd('create', probe, '--size', '1M', timeout=left)
                except RuntimeError as exc:
                    if 'already exists' not in str(exc):
                        raise
                self.rbd('rm', probe, timeout=left)
                return
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                last = exc
                time.sleep(0.5)
        raise RuntimeError('Ceph pool %s not usable after %ds: %s' % (
            self.pool, deadline, last))

    def _remember_pids(self) -> None:
        """Keep the daemons' pids in memory: stop() works without files."""
        for pid in self.pids():
            if pid not in self._pids:
                self._pids.append(pid)

    def pids(self) -> list[int]:
        found = []
        run_dir = os.path.join(self.root, 'run')
        for name in os.listdir(run_dir) if os.path.isdir(run_dir) else []:
            if name.endswith('.pid'):
                with open(os.path.join(run_dir, name)) as pid_file:
                    text = pid_file.read().strip()
                if text.isdigit():
                    found.append(int(text))
        return found

    def stop(self) -> None:
        """Stop osd and mon by pid: TERM, then KILL after 5 s."""
        pids = sorted(set(self._pids + self.pids()))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 5
        for pid in pids:
            while time.monotonic() < end:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
