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

"""opencas.conf rows across attach/detach on a simulated host (issue 12)."""

from unittest import mock

from os_brick_cas import exception
from os_brick_cas.opencas import opencas_conf
from os_brick_cas.privileged import devices as priv_devices
from tests import casctl_conf_checker as checker
from tests.functional import base


class OpenCasConfRowsTestCase(base.FunctionalTestCase):

    def rows(self) -> dict[tuple[int, int], str]:
        checker.check_file(self.opencas_conf)
        return opencas_conf.read(self.opencas_conf).cores

    def core_of(self, info: dict) -> tuple[int, int, str]:
        [core] = [core for core in self.cores()
                  if core.exported == info['path']]
        return core.cache_id, core.core_id, core.device

    def test_late_forget_keeps_the_row_the_freed_core_id_got(self):
        """Detach A frees core id k, attach B gets k, then A forgets k.

        The forget of A's row only runs once B has been attached in
        between (a hook around the real entry point orders the two; all of
        casadm, rbd and the file are real/simulated as usual).
        """
        props_a = self.props(self.image('volume-race-a'), 'wb')
        props_b = self.props(self.image('volume-race-b'), 'wb')
        info_a = self.connector.connect_volume(props_a)
        cache_a, core_a, device_a = self.core_of(info_a)
        self.assertEqual({(cache_a, core_a): device_a}, self.rows())
        attached = {}
        real_forget = priv_devices.forget_core

        def late_forget(*args, **kwargs):
            if not attached:
                attached['b'] = self.connector.connect_volume(props_b)
            return real_forget(*args, **kwargs)

        with mock.patch.object(priv_devices, 'forget_core',
                               side_effect=late_forget):
            self.connector.disconnect_volume(props_a, info_a)
        cache_b, core_b, device_b = self.core_of(attached['b'])
        # the race needs B to have been given A's freed core id
        self.assertEqual((cache_a, core_a), (cache_b, core_b))
        self.assertNotEqual(device_a, device_b)
        self.assertEqual({(cache_b, core_b): device_b}, self.rows())
        self.connector.disconnect_volume(props_b, attached['b'])
        self.assert_clean_host()
        checker.check_file(self.opencas_conf)

    def test_written_file_parses_for_casctl_through_a_cycle(self):
        infos = []
        propses = [self.props(self.image('volume-cycle-%d' % i), mode)
                   for i, mode in enumerate(('wb', 'wo', 'wt', 'wb'))]
        for props in propses:
            infos.append(self.connector.connect_volume(props))
            checker.check_file(self.opencas_conf)
        self.assertEqual(3, len(self.rows()))
        for props, info in zip(propses, infos):
            self.connector.disconnect_volume(props, info)
            checker.check_file(self.opencas_conf)
        self.assert_clean_host()

    def test_device_listed_under_another_core_refuses_attach(self):
        """A leftover row for the device is not joined by a second one.

        casctl rejects a file listing one device twice, and then no cache
        loads at boot; the attach is refused instead and the file kept.
        """
        props = self.props(self.image('volume-listed'), 'wb')
        info = self.connector.connect_volume(props)
        cache_id, core_id, device = self.core_of(info)
        self.connector.disconnect_volume(props, info)
        leftover = opencas_conf.CoreRow(cache_id, core_id + 9, device)
        opencas_conf.update_file(self.opencas_conf, add=leftover)
        with open(self.opencas_conf) as conf_file:
            before = conf_file.read()
        exc = self.assertRaises(exception.OpenCasConfRefused,
                                self.connector.connect_volume, props)
        self.assertIn('already listed as core %d' % (core_id + 9), str(exc))
        with open(self.opencas_conf) as conf_file:
            self.assertEqual(before, conf_file.read())
        checker.check_file(self.opencas_conf)
        self.assertEqual([], self.cores())
        self.assertEqual([], self.mappings())


class UnlistedCacheTestCase(base.FunctionalTestCase):
    """Write-back instance 2 is not under [caches] in opencas.conf."""

    persistent_caches = [1, 3, 4, 5]

    def test_write_back_attach_refused_and_file_untouched(self):
        with open(self.opencas_conf) as conf_file:
            before = conf_file.read()
        props = self.props(self.image('volume-unlisted'), 'wb')
        self.assertRaises(exception.CasError, self.connector.connect_volume,
                          props)
        with open(self.opencas_conf) as conf_file:
            self.assertEqual(before, conf_file.read())
        self.assertEqual([], self.cores())
