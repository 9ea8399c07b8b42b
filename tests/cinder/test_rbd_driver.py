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

"""cinder_ext's RBD driver on cinder's own test base (rados/rbd mocked)."""

from unittest import mock
import uuid

from cinder import context
from cinder import exception
from cinder import objects
from cinder.tests.unit import fake_snapshot
from cinder.tests.unit import fake_volume
from cinder.tests.unit import test
from cinder.tests.unit import utils
from cinder.tests.unit.volume.drivers import test_rbd
from cinder.volume.drivers import rbd as cinder_rbd
import ddt

from cinder_ext import guards
from cinder_ext import rbd

ATT0, ATT1, ATT2 = ('00000000-0000-0000-0000-0000000a770%d' % n
                    for n in range(3))

HOSTS = ['127.0.0.1']
PORTS = ['6789']


def specs(mode=None, cacheable=True, **extra):
    out = dict(extra)
    if cacheable:
        out['cacheable'] = '<is> True'
    if mode:
        out['cas:cache_mode'] = mode
    return out


FSID = '0f2ce6a4-6b4e-4d0b-9c1e-3c7a3f0e2b11'


class DriverTestBase(test.TestCase):
    """cinder_ext's driver over mocked rados, volumes in cinder's DB."""

    def setUp(self):
        super().setUp()
        self.cfg = test_rbd.RBDTestCase._make_configuration()
        # rados is mocked at its boundary: the cluster answers FSID
        self.rados = mock.MagicMock()
        self.rados.Rados.return_value.get_fsid.return_value = FSID
        self.driver = rbd.CachedRBDDriver(
            execute=mock.Mock(return_value=('', '')), configuration=self.cfg,
            rbd=mock.MagicMock(), rados=self.rados)
        self.driver.set_initialized()
        self.context = context.get_admin_context()
        self.driver._active_config = {'name': 'ceph', 'user': 'cinder',
                                      'conf': '/etc/ceph/ceph.conf',
                                      'secret_uuid': 'uuid'}
        mons = mock.patch.object(cinder_rbd.RBDDriver, '_get_mon_addrs',
                                 return_value=(HOSTS, PORTS))
        mons.start()
        self.addCleanup(mons.stop)

    def volume(self, extra_specs=None, status='available',
               admin_metadata=None, ctxt=None):
        """A volume in cinder's database, as *ctxt* loads it."""
        volume_type = utils.create_volume_type(
            self.context, name='type-%s' % uuid.uuid4(),
            extra_specs=extra_specs or {})
        volume = utils.create_volume(
            self.context, status=status, volume_type_id=volume_type.id,
            admin_metadata=admin_metadata)
        return objects.Volume.get_by_id(ctxt or self.context, volume.id)


@ddt.ddt
class CachedRBDDriverTestCase(DriverTestBase):
    @ddt.data('wt', 'wb', 'wa', 'wo', 'pt')
    def test_connection_info_per_mode(self, mode):
        volume = self.volume(specs(mode))
        info = self.driver.initialize_connection(volume, {'host': 'cmp1'})
        data = info['data']
        self.assertEqual('rbd', info['driver_volume_type'])
        self.assertEqual((True, mode), (data['cacheable'],
                                        data['cache_mode']))
        self.assertEqual('%s/%s' % (self.cfg.rbd_pool, volume.name),
                         data['name'])
        self.assertEqual((HOSTS, PORTS, 'cinder'),
                         (data['hosts'], data['ports'],
                          data['auth_username']))

    def test_connection_info_names_the_cluster(self):
        cached = self.driver.initialize_connection(
            self.volume(specs('wb')), {'host': 'cmp1'})
        plain = self.driver.initialize_connection(
            self.volume({}), {'host': 'cmp1'})
        self.assertEqual(FSID, cached['data']['cluster_fsid'])
        self.assertNotIn('cluster_fsid', plain['data'])

    def test_cacheable_without_mode_is_write_through(self):
        info = self.driver.initialize_connection(
            self.volume(specs()), {'host': 'cmp1'})
        self.assertEqual('wt', info['data']['cache_mode'])

    def test_connection_info_carries_the_share(self):
        shared = self.driver.initialize_connection(
            self.volume(specs('wb', **{'cas:cache_share': '25%'})),
            {'host': 'cmp1'})
        plain = self.driver.initialize_connection(
            self.volume(specs('wb')), {'host': 'cmp1'})
        self.assertEqual(25, shared['data']['cache_share'])
        self.assertNotIn('cache_share', plain['data'])

    def test_invalid_share_refused_at_connection(self):
        volume = self.volume(specs('pt', **{'cas:cache_share': '10'}))
        exc = self.assertRaises(exception.InvalidVolumeType,
                                self.driver.initialize_connection, volume,
                                {'host': 'cmp1'})
        self.assertIn("'cas:cache_share' needs a caching mode", str(exc))

    def test_share_only_retype_done_in_place_while_attached(self):
        """Issue 35: a share is a cap, not data; nothing is copied.

        A refusal here would make cinder's manager migrate (copy) the
        volume; the compute host applies the new share at the next attach.
        """
        volume = self.volume(specs('wb', **{'cas:cache_share': '10'}),
                             status='in-use', admin_metadata={
                                 guards.FENCE_KEY: 'cmp1',
                                 guards.FENCE_EPOCH_KEY: ATT0})
        for new_specs in (specs('wb', **{'cas:cache_share': '20'}),
                          specs('wb')):
            new_type = fake_volume.fake_volume_type_obj(
                self.context, extra_specs=new_specs)
            with mock.patch.object(cinder_rbd.RBDDriver, 'retype',
                                   return_value=(True, {})) as retype:
                self.assertEqual((True, {}), self.driver.retype(
                    self.context, volume, new_type, {}, None))
            retype.assert_called_once_with(self.context, volume, new_type,
                                           {}, None)

    def test_mode_and_share_change_refused_while_attached(self):
        volume = self.volume(specs('wb', **{'cas:cache_share': '10'}),
                             status='in-use')
        new_type = fake_volume.fake_volume_type_obj(
            self.context, extra_specs=specs('wt', **{'cas:cache_share': '20'}))
        with mock.patch.object(cinder_rbd.RBDDriver, 'retype') as retype:
            exc = self.assertRaises(exception.InvalidVolume,
                                    self.driver.retype, self.context,
                                    volume, new_type, {}, None)
            retype.assert_not_called()
        self.assertIn('from cache mode wb with a 10% share to wt with a 20% '
                      'share', str(exc))

    def test_share_added_to_uncached_type_is_not_share_only(self):
        volume = self.volume({}, status='in-use')
        new_type = fake_volume.fake_volume_type_obj(
            self.context, extra_specs=specs('wt', **{'cas:cache_share': '20'}))
        self.assertFalse(guards.changes_only_the_share(volume, new_type))
        self.assertRaises(exception.InvalidVolume, self.driver.retype,
                          self.context, volume, new_type, {}, None)

    def test_uncached_connection_info_unchanged(self):
        volume = self.volume({})
        ours = self.driver.initialize_connection(volume, {'host': 'cmp1'})
        plain = cinder_rbd.RBDDriver.initialize_connection(
            self.driver, volume, {'host': 'cmp1'})
        self.assertEqual(plain, ours)
        self.assertNotIn('cache_mode', ours['data'])

    def test_invalid_specs_refused_at_connection(self):
        volume = self.volume({'cas:cache_mode': 'wb'})
        exc = self.assertRaises(exception.InvalidVolumeType,
                                self.driver.initialize_connection, volume,
                                {'host': 'cmp1'})
        self.assertIn("'cas:cache_mode' needs 'cacheable'", str(exc))

    def test_reports_cacheable(self):
        with mock.patch.object(self.driver, '_get_pool_stats',
                               return_value=(10, 20)), \
                mock.patch.object(self.driver, '_get_usage_info',
                                  return_value=1), \
                mock.patch.object(self.driver, '_get_fsid',
                                  return_value='fsid'), \
                mock.patch.object(self.driver, '_supports_qos',
                                  return_value=False):
            self.driver._update_volume_stats()
        self.assertTrue(self.driver._stats['cacheable'])
        self.assertEqual('ceph', self.driver._stats['storage_protocol'])

    def test_fence_refuses_other_host(self):
        volume = self.volume(specs('wb'), admin_metadata={
            guards.FENCE_KEY: 'cmp1'})
        exc = self.assertRaises(exception.InvalidVolume,
                                self.driver.initialize_connection, volume,
                                {'host': 'cmp2'})
        self.assertIn('cmp1', str(exc))
        self.assertIn('os-brick-cas fence-clear', str(exc))
        # the fenced host itself may reconnect (reboot, re-attach)
        info = self.driver.initialize_connection(volume, {'host': 'cmp1'})
        self.assertEqual('wb', info['data']['cache_mode'])

    def drained_volume(self, drained_epoch, attachments=(ATT1,)):
        volume = self.volume(specs('wb'), status='in-use', admin_metadata={
            guards.FENCE_KEY: 'cmp1', guards.FENCE_EPOCH_KEY: ATT1,
            guards.FENCE_DRAINED_KEY: drained_epoch})
        volume.volume_attachment = objects.VolumeAttachmentList(objects=[
            objects.VolumeAttachment(id=attachment)
            for attachment in attachments])
        return volume

    def test_drained_volume_may_connect_elsewhere_and_be_snapshotted(self):
        """Issue 15: the owner drained it, so Ceph has its newest data."""
        volume = self.drained_volume(ATT1)
        info = self.driver.initialize_connection(volume, {'host': 'cmp2'})
        self.assertEqual('wb', info['data']['cache_mode'])
        guards.refuse_if_dirty_capable(volume, 'snapshot',
                                       allow_drained=True)
        # a clone is not part of what a drain allows
        self.assertRaises(exception.InvalidVolume,
                          guards.refuse_if_dirty_capable, volume, 'clone')

    @ddt.data((ATT0, (ATT1,)), (ATT1, (ATT2,)))
    @ddt.unpack
    def test_drained_flag_of_another_attachment_counts_for_nothing(
            self, drained_epoch, attachments):
        volume = self.drained_volume(drained_epoch, attachments)
        self.assertRaises(exception.InvalidVolume,
                          self.driver.initialize_connection, volume,
                          {'host': 'cmp2'})
        self.assertRaises(exception.InvalidVolume,
                          guards.refuse_if_dirty_capable, volume,
                          'snapshot', allow_drained=True)

    @ddt.data('wt', 'pt', None)
    def test_fence_applies_in_every_mode(self, mode):
        """Retyped after the fence was set: the marker still counts."""
        volume = self.volume(specs(mode, cacheable=bool(mode)),
                             admin_metadata={guards.FENCE_KEY: 'cmp1'})
        exc = self.assertRaises(exception.InvalidVolume,
                                self.driver.initialize_connection, volume,
                                {'host': 'cmp2'})
        self.assertIn('cmp1', str(exc))
        self.driver.initialize_connection(volume, {'host': 'cmp1'})

    @ddt.data(('wb', 'in-use', True), ('wo', 'in-use', True),
              ('wb', 'available', False), ('wt', 'in-use', False),
              (None, 'in-use', False))
    @ddt.unpack
    def test_snapshot_guard(self, mode, status, refused):
        volume = self.volume(specs(mode, cacheable=bool(mode)),
                             status=status)
        snapshot = fake_snapshot.fake_snapshot_obj(self.context)
        snapshot.volume = volume
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'create_snapshot') as create:
            if refused:
                exc = self.assertRaises(exception.InvalidVolume,
                                        self.driver.create_snapshot, snapshot)
                self.assertIn('Drain it first', str(exc))
                self.assertIn("write-through ('wt')", str(exc))
                create.assert_not_called()
            else:
                self.driver.create_snapshot(snapshot)
                create.assert_called_once_with(snapshot)

    def test_clone_guard(self):
        source = self.volume(specs('wb'), status='in-use')
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'create_cloned_volume') as clone:
            exc = self.assertRaises(exception.InvalidVolume,
                                    self.driver.create_cloned_volume,
                                    self.volume(), source)
            self.assertIn('cannot clone', str(exc))
            clone.assert_not_called()
            source.status = 'available'
            self.driver.create_cloned_volume(self.volume(), source)
            clone.assert_called_once()

    def test_backup_guard(self):
        volume = self.volume(specs('wo'), status='in-use')
        backup = mock.Mock(volume_id=volume.id)
        with mock.patch('cinder.objects.Volume.get_by_id',
                        return_value=volume), \
                mock.patch.object(cinder_rbd.RBDDriver,
                                  'get_backup_device') as device:
            exc = self.assertRaises(exception.InvalidVolume,
                                    self.driver.get_backup_device,
                                    self.context, backup)
            self.assertIn('cannot back up', str(exc))
            device.assert_not_called()

    def test_retype_between_modes_refused_while_attached(self):
        volume = self.volume(specs('wb'), status='in-use')
        new_type = fake_volume.fake_volume_type_obj(
            self.context, extra_specs=specs('wt'))
        with mock.patch.object(cinder_rbd.RBDDriver, 'retype',
                               return_value=(True, {})) as retype:
            exc = self.assertRaises(exception.InvalidVolume,
                                    self.driver.retype, self.context,
                                    volume, new_type, {}, None)
            self.assertIn('from cache mode wb to wt', str(exc))
            retype.assert_not_called()
            volume.status = 'available'
            self.assertEqual((True, {}), self.driver.retype(
                self.context, volume, new_type, {}, None))

    def test_extend_attached_cached_volume_refused(self):
        volume = self.volume(specs('wt'), status='in-use')
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'extend_volume') as extend:
            exc = self.assertRaises(exception.InvalidVolume,
                                    self.driver.extend_volume, volume, 20)
            self.assertIn('Detach it, extend it', str(exc))
            extend.assert_not_called()
            volume.status = 'available'
            self.driver.extend_volume(volume, 20)
            extend.assert_called_once_with(volume, 20)


@ddt.ddt
class MarkedAvailableVolumeTestCase(DriverTestBase):
    """Issue 32 (3): the marker protects a volume, not its attach status.

    An available write-back volume whose marker still names a host (the
    orphaned dirty core a deleted server or a force-detach leaves), or a
    volume retyped since to write-through or uncached: snapshot, clone,
    backup and retype are refused in the driver too (cinder calls it for
    paths the API extension does not see, e.g. a backup's temporary
    snapshot), with what to do.
    """

    MARKER = {guards.FENCE_KEY: 'cmp1', guards.FENCE_EPOCH_KEY: ATT0}

    def marked(self, mode='wb', status='available', ctxt=None):
        return self.volume(specs(mode, cacheable=bool(mode)), status=status,
                           admin_metadata=dict(self.MARKER), ctxt=ctxt)

    def assert_refused(self, volume, call, *args):
        exc = self.assertRaises(exception.InvalidVolume, call, *args)
        self.assertIn('its fence marker names host cmp1 (attachment %s)'
                      % ATT0, str(exc))
        self.assertIn("'os-brick-cas recover --volume %s'" % volume.id,
                      str(exc))
        self.assertIn("'os-brick-cas fence-clear %s --host-lost'"
                      % volume.id, str(exc))

    @ddt.data('wb', 'wo', 'wt', None)
    def test_snapshot_of_marked_available_volume_refused(self, mode):
        volume = self.marked(mode)
        snapshot = fake_snapshot.fake_snapshot_obj(self.context)
        snapshot.volume = volume
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'create_snapshot') as create:
            self.assert_refused(volume, self.driver.create_snapshot,
                                snapshot)
            create.assert_not_called()

    @ddt.data('wb', 'wt')
    def test_clone_of_marked_available_volume_refused(self, mode):
        source = self.marked(mode)
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'create_cloned_volume') as clone:
            self.assert_refused(source, self.driver.create_cloned_volume,
                                self.volume(), source)
            clone.assert_not_called()

    @ddt.data('wb', 'wt')
    def test_backup_of_marked_available_volume_refused(self, mode):
        volume = self.marked(mode)
        backup = mock.Mock(volume_id=volume.id)
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'get_backup_device') as device:
            self.assert_refused(volume, self.driver.get_backup_device,
                                self.context, backup)
            device.assert_not_called()

    @ddt.data(('wb', 'wb'), ('wb', 'wt'), ('wt', 'wt'))
    @ddt.unpack
    def test_retype_of_marked_available_volume_refused(self, old, new):
        """Any retype: a refusal makes cinder copy the stale image."""
        volume = self.marked(old)
        new_type = fake_volume.fake_volume_type_obj(
            self.context, extra_specs=specs(new))
        with mock.patch.object(cinder_rbd.RBDDriver, 'retype',
                               return_value=(True, {})) as retype:
            self.assert_refused(volume, self.driver.retype, self.context,
                                volume, new_type, {}, None)
            retype.assert_not_called()

    def test_drained_flag_of_a_gone_attachment_does_not_allow(self):
        volume = self.volume(specs('wb'), admin_metadata=dict(
            self.MARKER, **{guards.FENCE_DRAINED_KEY: ATT0}))
        snapshot = fake_snapshot.fake_snapshot_obj(self.context)
        snapshot.volume = volume
        with mock.patch.object(cinder_rbd.RBDDriver, 'create_snapshot'):
            self.assert_refused(volume, self.driver.create_snapshot,
                                snapshot)

    def test_unmarked_available_volume_allowed(self):
        volume = self.volume(specs('wb'))
        snapshot = fake_snapshot.fake_snapshot_obj(self.context)
        snapshot.volume = volume
        new_type = fake_volume.fake_volume_type_obj(
            self.context, extra_specs=specs('wt'))
        with mock.patch.object(cinder_rbd.RBDDriver,
                               'create_snapshot') as create, \
                mock.patch.object(cinder_rbd.RBDDriver,
                                  'create_cloned_volume') as clone, \
                mock.patch.object(cinder_rbd.RBDDriver, 'retype',
                                  return_value=(True, {})) as retype:
            self.driver.create_snapshot(snapshot)
            self.driver.create_cloned_volume(self.volume(), volume)
            self.driver.retype(self.context, volume, new_type, {}, None)
        create.assert_called_once_with(snapshot)
        clone.assert_called_once()
        retype.assert_called_once()
