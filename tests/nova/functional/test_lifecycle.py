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

"""Live migration, host reboot and evacuate of servers with cached volumes.

Each compute has its own simulated host (its own casadm and krbd state);
nova's real compute manager drives both.
"""

import contextlib
import io
import os
import re
import subprocess
from typing import Callable, Optional
import uuid

import fixtures

from lxml import etree
from nova.tests.functional.api import client
from oslotest import output

from nova import context as nova_context
from nova import objects
from nova.virt.libvirt import driver as libvirt_driver
from os_brick_cas.cmd import cinder_session
from os_brick_cas.cmd import main as cli
from tests.nova.functional import base

WT_VOL = str(uuid.UUID(int=0xca5e11))
WB_VOL = str(uuid.UUID(int=0xca5e12))


class LifecycleTestBase(base.CachedVolumeTestBase):

    ADMIN_API = True
    volumes = {WT_VOL: 'wt', WB_VOL: 'wb'}

    def setUp(self):
        super().setUp()
        self.useFixture(output.CaptureOutput())

    def cli(self, *argv: str) -> tuple[int, str]:
        """Run ``os-brick-cas ARGV`` against the fake Cinder; (code, text)."""
        cinder_session.session_factory = self.cinder.session
        self.addCleanup(setattr, cinder_session, 'session_factory', None)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(argv))
        return code, out.getvalue() + err.getvalue()

    def server_with_dirty_wb(self, dirty: int) -> tuple[dict, object]:
        """compute1 up, a server with WB_VOL attached, *dirty* blocks."""
        self.start_compute('compute1')
        server = self._create_server(networks='none')
        self.flags(host='compute1')
        self._attach_volume(server, WB_VOL)
        [core] = self.cores()
        self.host.set_dirty(core.cache_id, core.core_id, dirty)
        return server, core

    def crash_and_delete(self, server: dict) -> None:
        """compute1 crashes, *server* is deleted meanwhile, compute1 is back.

        nova's local delete: no detach ever reaches the host, whose cores
        come back inactive after its reboot.
        """
        service_id = self.take_down('compute1')
        self._delete_server(server)
        self.host.reboot()
        self.restart_compute_service('compute1',
                                     keep_hypervisor_state=False)
        self.admin_api.put_service_force_down(service_id, False)

    def take_down(self, compute: str) -> str:
        """Stop *compute* and force its service down; its service id."""
        self.computes[compute].stop()
        service_id = self.admin_api.get_services(
            host=compute, binary='nova-compute')[0]['id']
        self.admin_api.put_service_force_down(service_id, True)
        return service_id


class TwoComputesTestBase(LifecycleTestBase):
    """compute1 (with the server) and compute2, each on its own host."""

    def setUp(self):
        super().setUp()
        self.add_second_host()
        # one Ceph cluster behind both hosts (file images in this tier)
        self.create_images(self.hosts['compute2'])
        self.start_compute('compute1')
        self.server = self._create_server(networks='none')
        self.start_compute('compute2')
        for compute in ('compute1', 'compute2'):
            self.bind_compute_to_host(compute)


class LiveMigrationTestBase(TwoComputesTestBase):
    """Two computes; libvirt's migration job as nova's own tests fake it."""

    def setUp(self):
        super().setUp()
        self.useFixture(self._migrate_fixture())

    def _migrate_fixture(self):
        self.destination_xml: list[str] = []
        #: called when libvirt starts moving the guest (what holds then)
        self.at_switchover: Callable[[], None] = lambda: None

        def migrate(domain, destination, params, flags):
            self.at_switchover()
            xml = params['destination_xml']
            self.destination_xml.append(xml)
            self.computes['compute2'].driver._host.get_connection(
            ).createXML(xml, 0)
            uuid_ = etree.fromstring(xml).find('./uuid').text
            self.computes['compute1'].driver._host.get_connection(
            ).lookupByUUIDString(uuid_).complete_job()

        return fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', migrate)

    def migrate_to_compute2(self) -> None:
        """Ask for the migration (cast-as-call: a refusal raises)."""
        self.admin_api.post_server_action(self.server['id'], {
            'os-migrateLive': {'host': 'compute2',
                               'block_migration': 'auto'}})

    def attachment_of(self, server: dict, volume_id: str) -> str:
        [bdm] = [b for b in objects.BlockDeviceMappingList.
                 get_by_instance_uuid(nova_context.get_admin_context(),
                                      server['id'])
                 if b.volume_id == volume_id]
        return bdm.attachment_id

    def fail_migration_job(self, seen: Optional[dict] = None,
                           source_paused: bool = False) -> None:
        """libvirt reports the migration job failed (as nova's tests do).

        What holds on both hosts at that moment goes into *seen*. With
        *source_paused* the source guest stays paused, as after a
        post-copy migration that failed past its switchover.
        """
        def fails(domain, destination, params, flags):
            if seen is not None:
                seen.update(drained=self.drained_on('compute1'),
                            dest_cores=self.cores('compute2'))
            source = self.computes['compute1'].driver._host.get_connection(
            ).lookupByUUIDString(self.server['id'])
            if source_paused:
                source.suspend()
            source.fail_job()

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', fails))


class LiveMigrationTestCase(LiveMigrationTestBase):

    def test_write_through_volume_moves_to_destination_cache(self):
        self._attach_volume(self.server, WT_VOL)
        [source_core] = self.cores('compute1')
        self.assertEqual('/dev/cas1-1', source_core.exported)

        server = self._live_migrate(self.server, host='compute2',
                                    api=self.admin_api)
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        # what nova handed libvirt for the destination is a valid domain
        [xml] = self.destination_xml
        self.assert_valid_domain_xml(xml)
        # the destination built its own cache entry and the guest XML
        # libvirt received points at it
        [dest_core] = self.cores('compute2')
        self.assertEqual(1, dest_core.cache_id)
        self.assertEqual('/dev/cas1-51', dest_core.exported)
        self.assertEqual(['volumes/volume-' + WT_VOL],
                         ['%s/%s' % (m['pool'], m['name'])
                          for m in self.mappings('compute2')])
        # what the source builds the destination XML from: the
        # connection_info the destination's connect stored (nova's fake
        # domain drops <serial>, so nova cannot splice it into
        # destination_xml here; a hard reboot renders it instead)
        self.assertEqual('/dev/cas1-51',
                         self.stored_device_path(server, WT_VOL))
        # the source's entry is gone and it flushed nothing (wt is clean)
        self.assertEqual([], self.cores('compute1'))
        self.assertEqual([], self.mappings('compute1'))
        self.assertEqual([], self.host.calls(verb='flush-core'))
        self.assertEqual({}, self.cinder.fences)

        self._reboot_server(server, hard=True)
        self.assertIn("<source dev='/dev/cas1-51'/>",
                      self.guest_xml(server, 'compute2').replace('"', "'"))
        self.assertEqual([], self.cores('compute1'))

        self.detach(server, WT_VOL)
        self.assertEqual([], self.cores('compute2'))
        self.assertEqual([], self.mappings('compute2'))

    def assert_valid_domain_xml(self, xml: str) -> None:
        """libvirt's own schema check (virt-xml-validate, libvirt-clients)."""
        path = os.path.join(self.tmp, 'domain.xml')
        with open(path, 'w') as xml_file:
            xml_file.write(xml)
        result = subprocess.run(['virt-xml-validate', path, 'domain'],
                                capture_output=True, text=True)
        self.assertEqual(0, result.returncode, result.stderr + xml)

    def test_cached_source_and_uncached_destination_must_agree(self):
        """Issue 13 (e): nova keeps the disk type; a mismatch is refused."""
        self._attach_volume(self.server, WT_VOL)
        [source_core] = self.cores('compute1')
        # compute2 cannot cache (no module) and would attach via librbd
        self.hosts['compute2'].set_module_loaded(False)
        self.flags(no_cache_action='librbd', group='os_brick_cas_nova')
        # cast-as-call in the fixtures: the refused pre-check surfaces at
        # the API; in a cloud it is the migration's error
        exc = self.assertRaises(
            client.OpenStackApiException, self.admin_api.post_server_action,
            self.server['id'], {'os-migrateLive': {
                'host': 'compute2', 'block_migration': 'auto'}})
        self.assertIn('NoValidHost', str(exc))   # the forced host refused
        self.assertIn('is cached (Open CAS block disk) on the source host '
                      'but would be attached uncached on this host',
                      self.stdlog.logger.output)
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self.destination_xml)
        [still] = self.cores('compute1')
        self.assertEqual(source_core, still)
        self.assertEqual([], self.mappings('compute2'))

    # -- write-back: drained at the source, handed over at the switchover

    def assert_source_keeps_write_back(self, source_core, dirty: int
                                       ) -> None:
        """The guest stays on compute1 and its wb core caches writes."""
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        [core] = self.cores('compute1')
        self.assertEqual(source_core, core)
        self.assertEqual(dirty, self.dirty('compute1', core))
        self.assertEqual(set(), self.drained_on('compute1'))
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        self.assertEqual(self.attachment_of(server, WB_VOL),
                         self.cinder.epochs[WB_VOL])
        self.assertEqual({}, self.cinder.drained)
        self.assertEqual([], self.cores('compute2'))
        self.assertEqual([], self.mappings('compute2'))

    def attach_dirty_wb(self, dirty: int = 64):
        """WB_VOL attached to the server on compute1, *dirty* blocks."""
        self._attach_volume(self.server, WB_VOL)
        [source_core] = self.cores('compute1')
        self.host.set_dirty(source_core.cache_id, source_core.core_id, dirty)
        return source_core

    def test_write_back_volume_drains_then_moves_to_destination(self):
        source_core = self.attach_dirty_wb()
        seen_at_switchover = {}
        self.at_switchover = lambda: seen_at_switchover.update(
            dirty=self.dirty('compute1', source_core),
            drained=self.drained_on('compute1'),
            fence=dict(self.cinder.fences),
            dest_cores=self.cores('compute2'))
        self.migrate_to_compute2()
        server = self._wait_for_server_parameter(
            self.server, {'OS-EXT-SRV-ATTR:host': 'compute2',
                          'status': 'ACTIVE'})
        # before the switchover: the source had flushed everything and
        # pinned the core; the destination had its own wb core and the
        # marker (the source could no longer get dirty data)
        self.assertEqual(0, seen_at_switchover['dirty'])
        self.assertEqual({source_core.core_id},
                         seen_at_switchover['drained'])
        self.assertEqual({WB_VOL: 'compute2'}, seen_at_switchover['fence'])
        [dest_core] = seen_at_switchover['dest_cores']
        self.assertEqual(2, dest_core.cache_id)
        [xml] = self.destination_xml
        self.assert_valid_domain_xml(xml)
        # after it: the source removed its core, its drain class with it
        self.assertEqual([], self.cores('compute1'))
        self.assertEqual([], self.mappings('compute1'))
        self.assertEqual(set(), self.drained_on('compute1'))
        self.assertEqual([dest_core], self.cores('compute2'))
        self.assertEqual(set(), self.drained_on('compute2'))
        self.assertEqual({WB_VOL: 'compute2'}, self.cinder.fences)
        self.assertEqual(self.attachment_of(server, WB_VOL),
                         self.cinder.epochs[WB_VOL])
        self.assertEqual({}, self.cinder.drained)
        self.assertEqual(dest_core.exported,
                         self.stored_device_path(server, WB_VOL))
        # the destination caches writes and owns them: its detach
        # flushes and releases the volume
        self.hosts['compute2'].set_dirty(2, dest_core.core_id, 8)
        self.detach(server, WB_VOL)
        self.assertEqual([], self.cores('compute2'))
        self.assertEqual({}, self.cinder.fences)

    def test_failed_drain_refuses_before_start_and_keeps_write_back(self):
        source_core = self.attach_dirty_wb()
        self.host.inject_fault('flush-core', exit_code=1,
                               stderr='Error while writing to core '
                                      'device\n')
        self.assertRaises(client.OpenStackApiException,
                          self.migrate_to_compute2)
        self.assertIn('could not be drained before the live migration',
                      self.stdlog.logger.output)
        self.assertEqual([], self.destination_xml)
        self.assert_source_keeps_write_back(source_core, 64)

    def test_failed_migration_rolls_back_to_a_write_back_source(self):
        source_core = self.attach_dirty_wb()
        seen: dict = {}
        self.fail_migration_job(seen)
        self.migrate_to_compute2()
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        # it got as far as the destination's attach
        self.assertEqual({source_core.core_id}, seen['drained'])
        self.assertEqual(1, len(seen['dest_cores']))
        # the drain flushed the 64 blocks; the guest writes again here
        self.assert_source_keeps_write_back(source_core, 0)
        self.host.set_dirty(source_core.cache_id, source_core.core_id, 8)
        self.flags(host='compute1')     # nova's detach checks CONF.host
        self.detach(self._wait_for_state_change(self.server, 'ACTIVE'),
                    WB_VOL)
        self.assertEqual([], self.cores('compute1'))
        self.assertEqual({}, self.cinder.fences)

    def test_retried_pre_check_still_undrains_on_rollback(self):
        """The conductor re-runs the source check for another destination.

        The second check finds the volume drained - by nova, not by an
        operator - so the rollback must still undrain it.
        """
        source_core = self.attach_dirty_wb()
        compute1 = self.computes['compute1']
        context = nova_context.get_admin_context()
        instance = objects.Instance.get_by_uuid(context, self.server['id'])
        block_device_info = compute1.manager._get_instance_block_device_info(
            context, instance)
        driver = compute1.driver
        with self.on_host('compute1'):
            for _attempt in range(2):
                driver._drain_for_live_migration(instance,
                                                 block_device_info)
            self.assertEqual({source_core.core_id},
                             self.drained_on('compute1'))
            driver.rollback_live_migration_at_source(
                context, instance, objects.LibvirtLiveMigrateData())
        self.assertEqual(set(), self.drained_on('compute1'))
        self.assertEqual({}, self.cinder.drained)

    def test_rollback_with_the_guest_not_running_here_keeps_the_drain(self):
        """Failed after the switchover (post-copy): never take back."""
        source_core = self.attach_dirty_wb()
        self.fail_migration_job(source_paused=True)
        self.migrate_to_compute2()
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        self.assertIn('the guest is not running on this host',
                      self.stdlog.logger.output)
        self._run_periodics()
        # the source holds nothing Ceph lacks and cannot get dirty
        self.assertEqual({source_core.core_id}, self.drained_on('compute1'))
        self.assertEqual(0, self.dirty('compute1', source_core))
        self.assertNotEqual('compute1', self.cinder.fences.get(WB_VOL))

    def test_periodic_task_verifies_the_table_of_a_drain_it_keeps(self):
        """A held drain whose class was dropped by hand is drained again.

        Cinder keeps recording it drained; a table loaded by hand would
        let the core cache writes under that record.
        """
        source_core = self.attach_dirty_wb()
        self.fail_migration_job(source_paused=True)
        self.migrate_to_compute2()
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        self.assertEqual({source_core.core_id}, self.drained_on('compute1'))
        table = os.path.join(self.useFixture(fixtures.TempDir()).path,
                             'ioclass.csv')
        with open(table, 'w') as csv_file:
            csv_file.write('IO class id,IO class name,Eviction priority,'
                           'Allocation\n0,unclassified,255,1.00\n')
        self._tool('compute1', 'casadm', '-C', '-C', '-i',
                   str(source_core.cache_id), '-f', table)
        self.assertEqual(set(), self.drained_on('compute1'))
        self._run_periodics()
        self.assertIn('draining it again', self.stdlog.logger.output)
        self.assertEqual({source_core.core_id}, self.drained_on('compute1'))
        self.assertEqual(0, self.dirty('compute1', source_core))

    def test_failed_migration_keeps_an_operator_drain(self):
        """Drained ahead for maintenance: still drained after a rollback."""
        source_core = self.attach_dirty_wb()
        code, text = self.cli('drain', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(0, code, text)
        self.fail_migration_job()
        self.migrate_to_compute2()
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self.assertEqual({source_core.core_id}, self.drained_on('compute1'))
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        self.assertIn(WB_VOL, self.cinder.drained)
        self.assertEqual([], self.cores('compute2'))
        # the operator ends the drain: the marker names compute1 again
        code, text = self.cli('undrain', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(0, code, text)
        self.assertEqual(set(), self.drained_on('compute1'))
        self.assertEqual({}, self.cinder.drained)

    def fail_at_the_destination(self):
        """A migration whose destination fails pre_live_migration.

        Nova calls no source hook then: the source stays drained (safe,
        writes go straight to Ceph, only slower). Returns its core.
        """
        source_core = self.attach_dirty_wb()
        self.hosts['compute2'].inject_fault(
            'add-core', exit_code=1, stderr='Error while adding core device '
                                            'to cache instance 2\n')
        self.migrate_to_compute2()
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual({source_core.core_id}, self.drained_on('compute1'))
        return source_core

    def test_failure_at_the_destination_undrains_the_source_later(self):
        source_core = self.fail_at_the_destination()
        self._run_periodics()
        self.assert_source_keeps_write_back(source_core, 0)

    def restart_nova_compute(self, compute: str) -> None:
        """A new driver object: whatever it kept in memory is gone.

        nova's own state (the libvirt connection with its guests) is
        carried over, as a real restart finds the guests still running.
        """
        old = self.computes[compute].manager.driver
        fresh = type(old)(old.virtapi)
        nova_state = set(libvirt_driver.LibvirtDriver(old.virtapi).__dict__)
        for key in nova_state:
            setattr(fresh, key, old.__dict__[key])
        manager = self.computes[compute].manager
        manager.driver = manager.rt.driver = fresh
        self.bind_compute_to_host(compute)

    def test_restart_after_the_pre_check_still_undrains_later(self):
        """Issue 21: nova's record of its drains was kept in memory."""
        source_core = self.fail_at_the_destination()
        self.restart_nova_compute('compute1')
        self._run_periodics()
        self.assert_source_keeps_write_back(source_core, 0)

    def test_host_that_cannot_drain_refuses_before_anything(self):
        source_core = self.attach_dirty_wb()
        # v22.6: a disabled IO class leaves overlapping dirty lines
        self.host.set_version('22.06.0.0705.release')
        self.assertRaises(client.OpenStackApiException,
                          self.migrate_to_compute2)
        self.assertIn('this host cannot drain it', self.stdlog.logger.output)
        self.assertEqual([], self.host.calls(verb='flush-core'))
        self.host.set_version(None)
        self.assert_source_keeps_write_back(source_core, 64)


class OperatorDrainTestCase(LifecycleTestBase):
    """``os-brick-cas drain/undrain`` tell Cinder, marker first on undrain."""

    def test_drain_is_recorded_and_undrain_restores_write_back(self):
        server, core = self.server_with_dirty_wb(64)
        epoch = self.cinder.epochs[WB_VOL]
        code, text = self.cli('drain', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(0, code, text)
        self.assertIn('Cinder records it as drained', text)
        self.assertEqual({WB_VOL: epoch}, self.cinder.drained)
        self.assertEqual(0, self.dirty('compute1', core))
        self.assertEqual({core.core_id}, self.drained_on('compute1'))

        # Cinder unreachable: the undrain is refused, the core stays
        # drained (else Cinder would allow snapshots of dirty data)
        self.cinder.adapter.register_uri(
            'GET', re.compile(base.CINDER + '/volumes/[^/]+$'),
            status_code=503, json={})
        code, text = self.cli('undrain', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(1, code, text)
        self.assertEqual({core.core_id}, self.drained_on('compute1'))
        self.assertEqual({WB_VOL: epoch}, self.cinder.drained)

        self.cinder.adapter.register_uri(
            'GET', re.compile(base.CINDER + '/volumes/[^/]+$'),
            json=self.cinder._show)
        # the marker names another host: it may cache the volume's writes
        self.cinder.fences[WB_VOL] = 'compute9'
        code, text = self.cli('undrain', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(1, code, text)
        self.assertIn('refused: its fence marker names host compute9', text)
        self.assertEqual({core.core_id}, self.drained_on('compute1'))
        self.cinder.fences[WB_VOL] = 'compute1'
        code, text = self.cli('undrain', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(0, code, text)
        self.assertEqual({}, self.cinder.drained)
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        self.assertEqual(set(), self.drained_on('compute1'))


class HostRebootTestCase(LifecycleTestBase):

    def test_resume_after_host_reboot_reactivates_the_core(self):
        server, before = self.server_with_dirty_wb(48)

        self.host.reboot()
        [inactive] = self.cores()
        self.assertEqual('Inactive', inactive.status)
        self.assertEqual([], self.mappings())

        self.flags(resume_guests_state_on_host_boot=True)
        self.restart_compute_service('compute1',
                                     keep_hypervisor_state=False)
        self._wait_for_state_change(server, 'ACTIVE')
        # nova's hard reboot disconnects and reconnects every volume: the
        # inactive core was re-activated in its own instance (never added
        # as a second core), flushed to Ceph and added back in the same
        # instance, so the guest gets the same device
        self.assertEqual(1, len(self.host.calls(verb='try-add')))
        [flush] = self.host.calls(verb='flush-core')
        self.assertEqual(0, flush['exit_code'])
        [after] = self.cores()
        self.assertEqual('Active', after.status)
        self.assertEqual((before.cache_id, before.core_id, before.exported),
                         (after.cache_id, after.core_id, after.exported))
        self.assertEqual(1, len(self.mappings()))
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assertEqual(48, self.host.state()['flushed_blocks'])
        self.assertIn(after.exported, self.guest_xml(server))

        self.detach(server, WB_VOL)
        self.assertEqual([], self.cores())
        self.assertEqual([], self.mappings())
        self.assertEqual({}, self.cinder.fences)


class StoppedCacheRebootTestCase(LifecycleTestBase):
    """Issue 13 (a): the write-back cache did not load after a reboot."""

    def test_resume_refused_while_the_cache_is_down_then_recovers(self):
        server, before = self.server_with_dirty_wb(48)

        # SSD failed or casctl ran after nova-compute: instance 2 is absent
        self.host.reboot(not_started=[before.cache_id])
        self.flags(resume_guests_state_on_host_boot=True)
        self.restart_compute_service('compute1',
                                     keep_hypervisor_state=False)
        # the guest must not run on Ceph without its newest writes: the
        # resume fails, nothing is mapped, marker and opencas.conf row stay
        server = self._wait_for_state_change(server, 'ERROR',
                                             wait_for_fault_key=False)
        self.assertEqual([], self.mappings())
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        self.assertEqual(0, self.host.state()['flushed_blocks'])
        # only the first attach ever mapped the image
        self.assertEqual(1, len(self.host.calls(verb='map')))

        # the operator loads the cache and hard-reboots: data comes back
        self.host.load_cache(before.cache_id)
        self.api.post_server_action(server['id'], {'os-resetState': {
            'state': 'active'}})
        self._reboot_server(server, hard=True)
        [after] = self.cores()
        self.assertEqual((before.cache_id, before.core_id, 'Active'),
                         (after.cache_id, after.core_id, after.status))
        self.assertIn(after.exported, self.guest_xml(server))
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.detach(server, WB_VOL)
        self.assertEqual(48, self.host.state()['flushed_blocks'])
        self.assertEqual({}, self.cinder.fences)


class OrphanedCoreTestCase(LifecycleTestBase):
    """A server deleted while its host was down leaves a dirty core."""

    def test_recover_flushes_the_orphan_and_clears_the_marker(self):
        server, core = self.server_with_dirty_wb(48)
        # compute1 goes down; the server is deleted meanwhile (nova's
        # local delete: no detach ever reaches the host)
        self.crash_and_delete(server)
        [orphan] = self.cores()
        self.assertEqual(('Inactive', 48), (orphan.status, self.host.state()[
            'caches'][str(orphan.cache_id)]['cores'][str(
                orphan.core_id)]['dirty']))
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)

        code, text = self.cli('owners', '--host', 'compute1')
        [row] = [line for line in text.splitlines() if WB_VOL in line]
        self.assertIn('owner: this host', row)
        # another host name is refused: its data would not be the newest
        code, text = self.cli('recover', '--volume', WB_VOL,
                              '--host', 'compute9')
        self.assertEqual(1, code, text)
        self.assertIn('not the newest', text)
        code, text = self.cli('recover', '--volume', WB_VOL,
                              '--host', 'compute1')
        self.assertEqual(0, code, text)
        self.assertEqual([], self.cores())
        self.assertEqual([], self.mappings())
        self.assertEqual(48, self.host.state()['flushed_blocks'])
        self.assertEqual(0, self.host.state()['dropped_dirty_blocks'])
        self.assertEqual({}, self.cinder.fences)


class CleanCoreReuseTestCase(LifecycleTestBase):
    """Issue 13 (d): a wt core of an earlier attachment served old lines."""

    def test_new_attachment_never_reuses_a_left_over_clean_core(self):
        self.start_compute('compute1')
        self.flags(host='compute1')
        first = self._create_server(networks='none')
        self._attach_volume(first, WT_VOL)
        [old] = self.cores()
        # a crash; the server is deleted while the host is down, so the
        # wt core stays behind, inactive, with its (soon stale) lines
        self.crash_and_delete(first)
        [left] = self.cores()
        self.assertEqual((old.cache_id, old.core_id, 'Inactive'),
                         (left.cache_id, left.core_id, left.status))

        second = self._create_server(networks='none')
        self._attach_volume(second, WT_VOL)
        [fresh] = self.cores()
        self.assertEqual('Active', fresh.status)
        # the old core was removed and a new one added, not re-activated
        self.assertEqual([], self.host.calls(verb='try-add'))
        self.assertEqual(1, len(self.host.calls(verb='remove-inactive')))
        self.assertEqual(2, len(self.host.calls(verb='add-core')))
        self.detach(second, WT_VOL)
        self.assertEqual([], self.cores())


class EvacuateTestCase(TwoComputesTestBase):

    def fence_clear(self, *args: str) -> tuple[int, str]:
        return self.cli('fence-clear', WB_VOL, *args)

    def test_evacuate_refused_while_fenced_then_released(self):
        self._attach_volume(self.server, WB_VOL)
        [lost_core] = self.cores('compute1')
        self.host.set_dirty(lost_core.cache_id, lost_core.core_id, 64)
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)

        # compute1 is lost, with dirty data in its cache
        self.take_down('compute1')
        # cast-as-call in the fixtures: the refusal on compute2 reaches the
        # API; in a cloud it is the instance fault of a failed evacuation
        exc = self.assertRaises(
            client.OpenStackApiException, self.admin_api.post_server_action,
            self.server['id'], {'evacuate': {'host': 'compute2'}})
        self.assertIn('VolumeFenced', str(exc))
        self._wait_for_migration_status(self.server, ['failed'])
        server = self._wait_for_state_change(self.server, 'ERROR')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self.cores('compute2'))
        self.assertEqual([], self.mappings('compute2'))
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)

        # the operator must say the host is lost for good
        code, text = self.fence_clear()
        self.assertEqual(1, code)
        self.assertIn('rerun with --host-lost', text)
        self.assertEqual({WB_VOL: 'compute1'}, self.cinder.fences)
        code, text = self.fence_clear('--host-lost')
        self.assertEqual(0, code, text)
        self.assertEqual({}, self.cinder.fences)

        server = self._evacuate_server(
            server, {'host': 'compute2'}, expected_state='ACTIVE',
            expected_host='compute2')
        [core] = self.cores('compute2')
        self.assertEqual((2, '/dev/cas2-51'), (core.cache_id, core.exported))
        self.assertEqual({WB_VOL: 'compute2'}, self.cinder.fences)

    def test_returning_host_keeps_its_stale_blocks_out_of_ceph(self):
        """Issue 13 (b): compute1 comes back after its server moved."""
        self._attach_volume(self.server, WB_VOL)
        [stale] = self.cores('compute1')
        self.host.set_dirty(stale.cache_id, stale.core_id, 64)
        first_epoch = self.cinder.epochs[WB_VOL]
        self.assertIsNotNone(first_epoch)
        service_id = self.take_down('compute1')
        self.assertEqual(0, self.fence_clear('--host-lost')[0])
        # since API 2.95 an evacuated server is left stopped
        server = self._evacuate_server(
            self.server, {'host': 'compute2'}, expected_state='SHUTOFF',
            expected_host='compute2')
        self.assertEqual({WB_VOL: 'compute2'}, self.cinder.fences)
        second_epoch = self.cinder.epochs[WB_VOL]
        self.assertNotEqual(first_epoch, second_epoch)

        # compute1 returns: nova destroys the evacuated guest there and
        # disconnects its volumes; the 64 blocks are older than what
        # compute2 has written since and must never reach the image
        with self.on_host('compute1'):
            self.restart_compute_service('compute1')
        self.admin_api.put_service_force_down(service_id, False)
        self.assertEqual(0, self.host.state()['flushed_blocks'])
        self.assertEqual([], self.host.calls(verb='flush-core'))
        [kept] = self.cores('compute1')
        self.assertEqual((stale.cache_id, stale.core_id),
                         (kept.cache_id, kept.core_id))
        self.assertEqual(64, self.host.state()['caches'][
            str(kept.cache_id)]['cores'][str(kept.core_id)]['dirty'])
        # the owner's marker is untouched
        self.assertEqual({WB_VOL: 'compute2'}, self.cinder.fences)
        self.assertEqual(second_epoch, self.cinder.epochs[WB_VOL])
        server = self.api.get_server(server['id'])
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])

        # the operator sees what is what ...
        with self.on_host('compute1'):
            code, text = self.cli('owners', '--host', 'compute1')
        self.assertEqual(0, code, text)
        [row] = [line for line in text.splitlines() if WB_VOL in line]
        self.assertIn(first_epoch, row)
        self.assertIn('compute2/%s' % second_epoch, row)
        self.assertIn('stale, owner declared lost: discard', row)
        # doctor and status say the same
        with self.on_host('compute1'):
            code, text = self.cli('doctor', '--host', 'compute1')
            self.assertIn('Cinder names compute2/%s as owner: stale, owner '
                          'declared lost: discard' % second_epoch, text)
            code, text = self.cli('status', '--host', 'compute1')
            self.assertIn('owner: stale, owner declared lost: discard '
                          '(Cinder: compute2/%s)' % second_epoch, text)
        # ... and drops the stale blocks: only with the owner Cinder
        # recorded as lost, and only when confirmed
        with self.on_host('compute1'):
            code, text = self.cli('discard', '--volume', WB_VOL)
            self.assertEqual(1, code, text)
            self.assertIn('Rerun with --yes', text)
            self.assertEqual(1, len(self.cores('compute1')))
            code, text = self.cli('discard', '--volume', WB_VOL, '--yes')
            self.assertEqual(0, code, text)
        self.assertEqual([], self.cores('compute1'))
        self.assertEqual(64, self.host.state()['dropped_dirty_blocks'])
        self.assertEqual(0, self.host.state()['flushed_blocks'])
        # compute2's live data is never a discard candidate
        with self.on_host('compute2'):
            code, text = self.cli('discard', '--volume', WB_VOL, '--yes')
        self.assertEqual(1, code, text)
        self.assertIn('does not record as lost', text)
        self.assertEqual(1, len(self.cores('compute2')))
