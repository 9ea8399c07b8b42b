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

"""Drain and undrain through the product's IO-class manager (drain.py)."""

import threading

from tests.ceph import blockio
from tests.kernel import base

CHUNK = 64 * 1024


class DrainTestCase(base.KernelTestCase):

    caches = {2: 'wb'}

    def _writer(self, path, stop, written):
        """Rewrite the second MiB chunk by chunk until *stop* is set."""
        round_ = 0
        while not stop.is_set():
            for index in range(base.MIB // CHUNK):
                data = blockio.pattern('round %d chunk %d' % (round_, index),
                                       CHUNK)
                blockio.write_direct(path, base.MIB + index * CHUNK, data)
                written[index] = data
            round_ += 1

    def _lifecycle(self, transition: str, props: dict):
        """Drain or undrain through the life cycle (no Cinder markers)."""
        from os_brick_cas import lifecycle
        from os_brick_cas import volume as volume_mod
        spec = volume_mod.from_connection_properties(props).spec
        machine = lifecycle.Lifecycle(self.connector.volume_cache.casadm)
        return getattr(machine, transition)(
            lifecycle.volume_of(spec),
            lifecycle.Cinder('kernel-guest', None, in_use=False),
            lifecycle.deadline(120))

    def test_drain_with_writes_then_undrain(self):
        image = self.image('drain')
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        path = info['path']
        first = self.write(path, 0, blockio.pattern('first', base.MIB))
        [core] = self.cores()
        self.assertEqual(256, self.dirty(core))

        stop, written = threading.Event(), {}
        writer = threading.Thread(target=self._writer,
                                  args=(path, stop, written))
        writer.start()
        try:
            self.assertGreaterEqual(self._lifecycle(
                'drain', props).dirty_before, 256)
        finally:
            stop.set()
            writer.join()

        # every acknowledged write is in Ceph and none is dirty any more
        self.assertTrue(self.connector.is_drained(props))
        self.assertEqual(0, self.dirty(core,
                                       golden='stats-core-csv-drained'))
        self.assertEqual(first, self.in_ceph(image, 0, base.MIB))
        self.assertEqual(blockio.digest(b''.join(
            written[i] for i in range(base.MIB // CHUNK))),
            self.in_ceph(image, base.MIB, base.MIB))
        self.casadm_ok('--io-class', '--list', '--cache-id', '2',
                       '--output-format', 'csv',
                       golden='io-class-list-drained')
        # drained: a new write goes straight to Ceph
        during = self.write(path, 4 * base.MIB,
                            blockio.pattern('drained', base.MIB))
        self.assertEqual(0, self.dirty(core))
        self.assertEqual(during, self.in_ceph(image, 4 * base.MIB,
                                              base.MIB))

        self.assertTrue(self._lifecycle('undrain', props))

        self.assertFalse(self.connector.is_drained(props))
        after = self.write(path, 6 * base.MIB,
                           blockio.pattern('undrained', base.MIB))
        self.assertEqual(256, self.dirty(core))
        self.assertNotEqual(after, self.in_ceph(image, 6 * base.MIB,
                                                base.MIB))
        self.connector.disconnect_volume(props, info)
        self.assertEqual(after, self.in_ceph(image, 6 * base.MIB, base.MIB))
        self.assert_clean_host()
