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

"""Drain/undrain through the real casadm path (issue 15, first slice).

The stand-in casadm stores and lists IO-class tables as casadm does; the
data-true behaviour (writes bypassing the cache) is on the real-Ceph tier.
"""

import subprocess

from os_brick_cas import casadm
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas.metrics import eventlog
from os_brick_cas import report
from tests.functional import base


class DrainTestCase(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        self.casadm = casadm.Casadm()
        self.manager = drain.DrainManager(self.casadm)

    def attach_dirty(self, name: str, dirty: int = 40):
        props = self.props(self.image(name), 'wb')
        info = self.connector.connect_volume(props)
        [core] = [c for c in self.cores() if name in c.device.replace(
            '%2D', '-')]
        self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return props, info, core

    def cache_of(self, core):
        [cache] = [c for c in self.casadm.list_caches()
                   if c.cache_id == core.cache_id]
        return cache

    def io_class_csv(self, cache_id: int) -> str:
        return subprocess.run(
            ['casadm', '--io-class', '--list', '--cache-id', str(cache_id),
             '--output-format', 'csv'], capture_output=True, text=True,
            check=True).stdout

    def test_drain_flushes_and_pins_the_core_then_undrain_unpins(self):
        props, info, core = self.attach_dirty('volume-drain')
        events = eventlog.EventCollector()
        self.manager.drain(self.cache_of(core), core, 10)
        self.assertEqual(0, self.dirty(core))
        # the exporter sees the drain's duration
        [family] = [f for f in events.collect()
                    if f.name == 'os_brick_cas_drain_seconds']
        self.assertEqual(1, [s.value for s in family.samples
                             if s.name.endswith('_count') and
                             s.labels['result'] == 'ok'][0])
        self.assertIn('%d,core_id:eq:%d&done,0,0.00' % (1, core.core_id),
                      self.io_class_csv(core.cache_id))
        self.assertTrue(self.manager.is_drained(core.cache_id,
                                                core.core_id))
        # status shows it
        [core_report] = [c for cache in report.host_report(self.casadm)
                         for c in cache.cores if c.core_id == core.core_id
                         and c.cache_id == core.cache_id]
        self.assertTrue(core_report.drained)
        # idempotent: a second drain loads nothing new
        loads = len(self.host.calls(verb='io-class'))
        self.manager.drain(self.cache_of(core), core, 10)
        self.assertEqual(loads + 1, len(self.host.calls(verb='io-class')))
        self.manager.undrain(self.cache_of(core), core, core.core_id)
        self.assertNotIn('core_id:eq:', self.io_class_csv(core.cache_id))
        self.connector.disconnect_volume(props, info)
        self.assert_clean_host()

    def test_failed_flush_keeps_the_core_drained_and_its_data(self):
        props, info, core = self.attach_dirty('volume-drain-fail')
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core device\n')
        self.assertRaises(exception.FlushFailed, self.manager.drain,
                          self.cache_of(core), core, 10)
        self.assertEqual(40, self.dirty(core))
        self.assertTrue(self.manager.is_drained(core.cache_id,
                                                core.core_id))

    def test_classes_of_removed_cores_are_dropped(self):
        props_a, info_a, core_a = self.attach_dirty('volume-drain-a')
        props_b, info_b, core_b = self.attach_dirty('volume-drain-b')
        self.manager.drain(self.cache_of(core_a), core_a, 10)
        self.connector.disconnect_volume(props_a, info_a)
        # the detach dropped core a's class: a new core with its id would
        # otherwise inherit it
        self.assertNotIn('core_id:eq:', self.io_class_csv(core_a.cache_id))
        self.manager.drain(self.cache_of(core_b), core_b, 10)
        table = self.io_class_csv(core_b.cache_id)
        self.assertIn('core_id:eq:%d&done' % core_b.core_id, table)
        self.assertEqual(1, table.count('core_id:eq:'))
        self.manager.undrain(self.cache_of(core_b), core_b, core_b.core_id)
        self.connector.disconnect_volume(props_b, info_b)

    def test_compose_refuses_beyond_32_drained_cores(self):
        self.assertEqual(33, len(drain.compose(set(range(1, 33)))))
        self.assertRaises(ValueError, drain.compose, set(range(1, 34)))
