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

"""Refusals cinder must give at the API, before anything is scheduled.

* Snapshots, backups and clones of attached write-back volumes, and of
  any volume whose fence marker names a host (an available volume keeps
  it while that host holds an orphaned dirty core). The driver refuses
  them too, but only asynchronously: the snapshot then goes to
  ``error`` after the API said 202, and nova's snapshot of a volume-backed
  server records an image that points at that errored snapshot.
* Retype, migration and unmanage of a volume whose fence marker is set
  (a host may hold its newest writes), attached or not: when the driver's
  retype refuses, cinder falls back to a generic migration that copies
  the stale image. A retype that changes only ``cas:cache_share`` and may
  not migrate is let through: the driver does it in place.

These pre-processing extensions answer 400 before anything happens.
Loaded by :class:`cinder_ext.api.fence.Fence`.
"""

from typing import Any, Iterator

from cinder.api.openstack import wsgi
from cinder import exception
from cinder import volume as cinder_volume
from cinder.volume import volume_types
import webob

from cinder_ext import guards


class _GuardController(wsgi.Controller):
    """Runs :func:`guards.refuse_if_dirty_capable` before *operation*."""

    operation = ''
    body_key = ''
    #: the key of the request's object that names the volume read
    volume_key = 'volume_id'
    #: a drain by the marker's current attachment makes it consistent
    allow_drained = True

    def __init__(self):
        super().__init__()
        self.volume_api = cinder_volume.API()

    def _refuse(self, req: Any, body: Any) -> None:
        request = (body or {}).get(self.body_key)
        if not isinstance(request, dict):
            return  # cinder's own schema validation answers
        volume_id = request.get(self.volume_key)
        if not isinstance(volume_id, str):
            return  # cinder's own schema validation answers
        context = req.environ['cinder.context']
        try:
            volume = self.volume_api.get(context, volume_id)
        except exception.VolumeNotFound:
            return  # cinder's own controller answers 404
        try:
            guards.refuse_if_dirty_capable(volume, self.operation,
                                           allow_drained=self.allow_drained)
        except exception.InvalidVolume as exc:
            raise webob.exc.HTTPBadRequest(explanation=exc.msg)


class SnapshotGuardController(_GuardController):
    operation = 'snapshot'
    body_key = 'snapshot'

    @wsgi.extends
    def create(self, req: Any, body: Any) -> Iterator[None]:
        self._refuse(req, body)
        yield


class BackupGuardController(_GuardController):
    operation = 'back up'
    body_key = 'backup'

    @wsgi.extends
    def create(self, req: Any, body: Any) -> Iterator[None]:
        self._refuse(req, body)
        yield


class CloneGuardController(_GuardController):
    """A new volume whose source is a volume (a clone)."""

    operation = 'clone'
    body_key = 'volume'
    volume_key = 'source_volid'
    # the driver's clone allows no drain either: a drain is kept for the
    # operations nova quiesces the guest for
    allow_drained = False

    @wsgi.extends
    def create(self, req: Any, body: Any) -> Iterator[None]:
        self._refuse(req, body)
        yield


class FencedVolumeGuardController(wsgi.Controller):
    """Volume actions that must wait until no host may hold newer data."""

    def __init__(self):
        super().__init__()
        self.volume_api = cinder_volume.API()

    def _refuse_if_fenced(self, req: Any, volume_id: str,
                          operation: str) -> None:
        context = req.environ['cinder.context']
        try:
            volume = self.volume_api.get(context, volume_id)
        except exception.VolumeNotFound:
            return  # cinder's own controller answers 404
        host = guards.read_marker(volume).host
        if host:
            raise webob.exc.HTTPBadRequest(explanation=(
                'cannot %(op)s volume %(vol)s: host %(host)s may hold its '
                'newest writes in its Open CAS cache (fence marker set). '
                'Detach it cleanly on %(host)s first; only if that host is '
                "lost for good: 'os-brick-cas fence-clear %(vol)s "
                "--host-lost'." % {'op': operation, 'vol': volume_id,
                                   'host': host}))

    @wsgi.extends(action='os-retype')
    def _retype(self, req: Any, id: str, body: Any) -> Iterator[None]:
        if not self._share_only_in_place(req, id, body):
            self._refuse_if_fenced(req, id, 'retype')
        yield

    def _share_only_in_place(self, req: Any, volume_id: str,
                             body: Any) -> bool:
        """A retype that changes only the share and never migrates.

        Without ``migration_policy: on-demand`` cinder retypes in place or
        not at all, and cinder_ext's driver retypes a share-only change in
        place (:func:`guards.changes_only_the_share`): nothing is copied,
        so a fenced volume's share may change (applied at its next
        attach).
        """
        request = (body or {}).get('os-retype')
        if not isinstance(request, dict) or request.get(
                'migration_policy') == 'on-demand':
            return False
        new_type = request.get('new_type')
        if not isinstance(new_type, str):
            return False  # cinder's own schema validation answers
        context = req.environ['cinder.context']
        try:
            volume = self.volume_api.get(context, volume_id)
            found = volume_types.get_by_name_or_id(context.elevated(),
                                                   new_type)
            return guards.changes_only_the_share(volume, found)
        except (exception.VolumeNotFound, exception.VolumeTypeNotFound,
                exception.VolumeTypeNotFoundByName,
                exception.InvalidVolumeType):
            return False  # cinder's own controller answers

    @wsgi.extends(action='os-migrate_volume')
    def _migrate(self, req: Any, id: str, body: Any) -> Iterator[None]:
        self._refuse_if_fenced(req, id, 'migrate')
        yield

    @wsgi.extends(action='os-unmanage')
    def _unmanage(self, req: Any, id: str, body: Any) -> Iterator[None]:
        self._refuse_if_fenced(req, id, 'unmanage')
        yield
