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

"""Issue 21 on real Ceph: an undrain Cinder cannot be told of, then evacuate.

Data-true stand-in over a real image. A write-back volume with
acknowledged writes is drained (Cinder records it drained); the CLI
without Cinder credentials tries to undrain it and must be refused, so
the core keeps writing straight to Ceph while Cinder says "drained". The
host then dies, Cinder lets another host take the volume over (evacuate)
and that host maps the image from Ceph: every acknowledged write must be
there, byte for byte (sha256).
"""

import contextlib
import io

import fixtures

from os_brick_cas.cmd import main as cli
from tests.ceph import base
from tests.ceph import blockio
from tests.functional import fake_cinder

MIB = 2 ** 20
HOST = 'cmp1'
NEW_HOST = 'cmp2'
EPOCH = 'a0a0a0a0-0000-4000-8000-00000000021a'


class UndrainThenEvacuateTestCase(base.CephTestCase):

    def setUp(self) -> None:
        super().setUp()
        self.cinder = fake_cinder.FakeCinder()

    def cli(self, *argv: str, credentials: bool) -> tuple[int, str]:
        """``os-brick-cas ARGV`` on this host, with or without Cinder."""
        self.useFixture(fixtures.MonkeyPatch(
            'os_brick_cas.cmd.cinder_session.session_factory',
            self.cinder.session if credentials else None))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = cli.main(list(argv) + ['--host', HOST])
        return code, out.getvalue()

    def test_refused_undrain_keeps_every_acknowledged_write_in_ceph(self):
        volume = self.create('wb')
        info = self.initialize_connection(volume)
        props = dict(info['data'], cas_epoch=EPOCH)
        # nova's attach: the marker names this host, then the core
        self.cinder.markers[volume.id] = {'host': HOST, 'epoch': EPOCH,
                                          'drained': False}
        device = self.connector.connect_volume(props)
        acked = {0: blockio.pattern('cached ' + volume.id, MIB)}
        blockio.write_direct(device['path'], 0, acked[0])
        self.assertEqual(256, self.dirty_blocks(device['path']))

        code, text = self.cli('drain', '--volume', volume.id,
                              credentials=True)
        self.assertEqual(0, code, text)
        self.assertTrue(self.cinder.owner(volume.id).drained)

        # the CLI without credentials: Cinder would keep saying drained
        code, text = self.cli('undrain', '--volume', volume.id,
                              credentials=False)
        self.assertEqual(1, code, text)
        self.assertIn('Cinder cannot be told', text)
        self.assertTrue(self.cinder.owner(volume.id).drained)

        # the guest keeps writing: each write is acknowledged by the
        # cache device and must not be cached dirty
        for offset in (2 * MIB, 4 * MIB):
            acked[offset] = blockio.pattern('after %d %s' % (offset,
                                                             volume.id), MIB)
            blockio.write_direct(device['path'], offset, acked[offset])
        self.assertEqual(0, self.dirty_blocks(device['path']))

        # the host dies with whatever its cache holds; Cinder says
        # drained, so the evacuation takes the marker over
        self.host.reboot()
        owner = self.cinder.owner(volume.id)
        self.assertTrue(owner.drained)
        self.cinder.client().set(volume.id, NEW_HOST, 'b0b0-evacuated',
                                 expect=owner)
        # the new host maps the image from Ceph: every acknowledged byte
        for offset, payload in sorted(acked.items()):
            self.assertEqual(blockio.digest(payload),
                             self.ceph_digest(volume.name, offset, MIB),
                             'acknowledged write at %d MiB is not in Ceph'
                             % (offset // MIB))
