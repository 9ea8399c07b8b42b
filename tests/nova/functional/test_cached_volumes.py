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

"""Boot, attach per cache mode, detach, refuse — through nova's manager."""

import os
import uuid

from nova.tests.functional.api import client

from cas_standin import module as sim_module
from os_brick_cas.opencas import known_defects
from tests.nova.functional import base

WT_VOL = str(uuid.UUID(int=0xca5e1))
WB_VOL = str(uuid.UUID(int=0xca5e2))
PLAIN_VOL = str(uuid.UUID(int=0xca5e3))


class CachedVolumeAttachTestCase(base.CachedVolumeTestBase):

    volumes = {WT_VOL: 'wt', WB_VOL: 'wb', PLAIN_VOL: None}

    def setUp(self):
        super().setUp()
        self.start_compute('compute1')
        self.server = self._create_server(networks='none')

    def attached_disk_xml(self, needle: str) -> str:
        found = [xml for xml in self.attach_xml if needle in xml]
        self.assertEqual(1, len(found), self.attach_xml)
        return found[0]

    def test_attach_per_mode_and_plain_then_detach(self):
        for volume_id in (WT_VOL, WB_VOL, PLAIN_VOL):
            self._attach_volume(self.server, volume_id)
        cores = {core.device: core for core in self.cores()}
        self.assertEqual(2, len(cores))
        wt = cores[self.host.by_id_link('volumes', 'volume-' + WT_VOL)]
        wb = cores[self.host.by_id_link('volumes', 'volume-' + WB_VOL)]
        self.assertEqual((1, 2), (wt.cache_id, wb.cache_id))
        for core in (wt, wb):
            xml = self.attached_disk_xml(core.exported)
            self.assertIn('<disk type="block" device="disk">', xml)
            self.assertIn('<source dev="%s"/>' % core.exported, xml)
            self.assertIn('cache="none"', xml)
            self.assertIn('io="native"', xml)
            self.assertIn('discard="unmap"', xml)
        plain = self.attached_disk_xml('volume-' + PLAIN_VOL)
        self.assertIn('<disk type="network" device="disk">', plain)
        self.assertIn('protocol="rbd"', plain)
        self.assertIn('name="volumes/volume-%s"' % PLAIN_VOL, plain)
        # only the cached volumes are mapped through krbd
        self.assertEqual(2, len(self.mappings()))
        # the write-back volume is fenced to this host while attached
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        self.host.set_dirty(wb.cache_id, wb.core_id, 32)

        for volume_id in (WT_VOL, WB_VOL, PLAIN_VOL):
            self.detach(self.server, volume_id)
        self.assertEqual([], self.cores())
        self.assertEqual([], self.mappings())
        self.assertEqual([], self.by_id_links())
        self.assertEqual({}, self.cinder.fences)
        flushes = self.host.calls(verb='flush-core')
        self.assertEqual(1, len(flushes))

    def test_write_back_volume_fenced_by_another_host_is_refused(self):
        self.cinder.fences[WB_VOL] = 'compute-lost'
        # the functional fixtures turn the compute cast into a call, so the
        # refusal surfaces at the API; in a cloud it is an instance fault
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_volume,
            self.server['id'], {'volumeAttachment': {'volumeId': WB_VOL}})
        self.assertIn('VolumeFenced', str(exc))
        self.assertEqual({WB_VOL: 'compute-lost'}, self.cinder.fences)
        self.assertEqual([], self.cores())
        self.assertEqual([], self.mappings())
        # the operator clears the fence knowingly; the attach then works
        del self.cinder.fences[WB_VOL]
        self._attach_volume(self.server, WB_VOL)
        self.assertEqual(1, len(self.cores()))
        self.detach(self.server, WB_VOL)
        self.assertEqual([], self.cores())

    def test_failed_attach_clears_the_marker_it_set(self):
        """By compare-and-swap on the marker this attach wrote."""
        self.host.inject_fault('add-core', exit_code=1,
                               stderr='Error while adding core device to '
                                      'cache instance 2\n')
        self.assertRaises(
            client.OpenStackApiException, self.api.post_server_volume,
            self.server['id'], {'volumeAttachment': {'volumeId': WB_VOL}})
        self.assertEqual({}, self.cinder.fences)
        self.assertEqual([], self.cores())

    def test_fenced_volume_retyped_to_write_through_is_refused(self):
        """Issue 13 (c): the marker counts whatever the volume's mode now.

        The volume was write-back on compute-lost (dirty core left after a
        failed detach nova ignored) and retyped to wt while available.
        """
        self.cinder.fences[WT_VOL] = 'compute-lost'
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_volume,
            self.server['id'], {'volumeAttachment': {'volumeId': WT_VOL}})
        self.assertIn('VolumeFenced', str(exc))
        self.assertEqual({WT_VOL: 'compute-lost'}, self.cinder.fences)
        self.assertEqual([], self.cores())
        self.assertEqual([], self.mappings())

    def test_hard_reboot_reattaches_same_cache_device(self):
        self._attach_volume(self.server, WB_VOL)
        [before] = self.cores()
        self.api.post_server_action(self.server['id'],
                                    {'reboot': {'type': 'HARD'}})
        self._wait_for_state_change(self.server, 'ACTIVE')
        [after] = self.cores()
        self.assertEqual((before.cache_id, before.core_id, before.exported),
                         (after.cache_id, after.core_id, after.exported))
        self.detach(self.server, WB_VOL)

    def test_traits_per_offered_mode(self):
        traits = self._get_provider_traits(self.compute_rp_uuids['compute1'])
        self.assertIn('CUSTOM_OPENCAS_WT', traits)
        self.assertIn('CUSTOM_OPENCAS_WB', traits)

    def test_no_wb_trait_while_the_loaded_release_can_lose_wb_writes(self):
        # nova's placement sees the same decision as the attach (policy)
        version = os.path.join(self.tmp, 'root', known_defects.VERSION_FILE)
        os.makedirs(os.path.dirname(version))
        with open(version, 'w') as version_file:
            version_file.write('26.03.2.0000.release\n')
        self._run_periodics()
        traits = self._get_provider_traits(self.compute_rp_uuids['compute1'])
        self.assertIn('CUSTOM_OPENCAS_WT', traits)
        self.assertNotIn('CUSTOM_OPENCAS_WB', traits)
        self.flags(accepted_data_loss_defects=['ocf-hit-invalid-backfill'],
                   group='os_brick_cas')
        self._run_periodics()
        self.assertIn('CUSTOM_OPENCAS_WB', self._get_provider_traits(
            self.compute_rp_uuids['compute1']))

    def test_wb_trait_on_the_patched_build_with_nothing_accepted(self):
        # the role's v26.03.2 build with its patch series, loaded
        root = os.path.join(self.tmp, 'root')
        built = sim_module.build(root, '26.03.2.0000.release')
        sim_module.load(root, '26.03.2.0000.release', built)
        self._run_periodics()
        self.assertIn('CUSTOM_OPENCAS_WB', self._get_provider_traits(
            self.compute_rp_uuids['compute1']))
        # the release's own module loaded instead: no trait
        sim_module.load(root, '26.03.2.0000.release')
        self._run_periodics()
        self.assertNotIn('CUSTOM_OPENCAS_WB', self._get_provider_traits(
            self.compute_rp_uuids['compute1']))

    def test_write_back_live_migration_refused_where_drain_is_impossible(
            self):
        """Issue 15: only a host that cannot drain still refuses."""
        self.start_compute('compute2')
        # v22.6: a disabled IO class leaves overlapping dirty lines
        self.host.set_version('22.06.0.0705.release')
        # two computes share one CONF in this process; nova's detach and
        # the fence marker read CONF.host, which must name the source
        self.flags(host='compute1')
        self._attach_volume(self.server, WB_VOL)
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        # cast-as-call in the fixtures: the conductor's NoValidHost
        # (raised for the failed pre-check) reaches the API directly
        self.assertRaises(
            client.OpenStackApiException, self.admin_api.post_server_action,
            self.server['id'], {'os-migrateLive': {
                'host': 'compute2', 'block_migration': 'auto'}})
        self.assertIn('volume %s is cached on this host in Open CAS mode wb '
                      'and this host cannot drain it' % WB_VOL,
                      self.stdlog.logger.output)
        self.assertIn('Cold-migrate the server', self.stdlog.logger.output)
        [migration] = self.admin_api.get_migrations()
        self.assertEqual('error', migration['status'])
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(self.cores()))
        self.host.set_version(None)   # (its detach flush needs -F -j)
        self.detach(self.server, WB_VOL)
        self.assertEqual([], self.cores())
