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

"""Cinder API extension: the os-brick-cas fence marker on a volume.

A compute host that attaches a write-back/write-only volume records itself
here (its cache may hold writes Ceph does not have); a clean detach clears
it; an attach elsewhere is refused while it names another host, unless
that host drained the volume (``'drained': true`` in the set action: the
named attachment flushed it and keeps it from getting dirty, e.g. before a
live migration, whose destination then takes the marker over). Cinder has
no API to write admin metadata, so this extension provides one, which a
volume's owner cannot change. Who may set, clear and see the marker is
oslo.policy (:mod:`cinder_ext.policies`, default: admin or service role),
overridable in cinder's policy file. The same extension refuses snapshots,
backups and clones of attached write-back volumes and of fenced volumes
(attached or not), and retype/migration/unmanage of fenced volumes,
synchronously (400) at the API (:mod:`cinder_ext.api.sync_guards`).

A change is a compare-and-swap when the body names the record the caller
read, ``'expect': {'host': ..., 'epoch': ... or null, 'drained': ...}``
(``null``: no marker): if the marker is another, nothing changes and the
answer is 409 with ``{'conflict': {'message': ..., 'current': <record or
null>}}``, as cinder's conditional_update does for a volume's status.
Without ``expect`` the change is unconditional (older compute hosts). The
read, compare and write hold a per-volume lock of cinder's coordination
backend (``[coordination] backend_url``): its default, file locks under
cinder's state_path, serialises the workers of one node; active/active
cinder-api nodes need a shared backend (etcd, redis), as cinder itself
needs for active/active. Enable the extension in cinder.conf::

    [DEFAULT]
    osapi_volume_extension = cinder.api.contrib.standard_extensions
    osapi_volume_extension = cinder_ext.api.fence.Fence
"""

from typing import Any, Callable

from cinder.api import extensions
from cinder.api.openstack import wsgi
from cinder import coordination
from cinder.db import api as db
from cinder import exception
from cinder import policy as cinder_policy
from cinder import volume as cinder_volume
from oslo_log import log as logging
import webob

from cinder_ext.api import sync_guards
from cinder_ext import compat
from cinder_ext import guards
from cinder_ext import policies
from os_brick_cas import fence_wire as wire

#: tooz lock of one volume's marker (cinder's coordination backend)
LOCK_NAME = 'os-brick-cas-fence-%s'
#: seconds a change waits for that lock (held for milliseconds per change)
LOCK_TIMEOUT = 10
#: no ``expect`` in the request: change the marker whatever it is
UNCONDITIONAL = object()

LOG = logging.getLogger(__name__)


def _expected(params: dict) -> Any:
    """The record ``expect`` names: UNCONDITIONAL, None or a record.

    ``null``, or a record whose host is null (and epoch null, drained
    false), means "no marker". Anything else malformed is a 400.
    """
    if wire.EXPECT not in params:
        return UNCONDITIONAL
    expect = params[wire.EXPECT]
    if expect is None:
        return None
    host = epoch = drained = object()   # invalid unless given
    if isinstance(expect, dict) and set(expect) == wire.EXPECT_KEYS:
        host, epoch, drained = (expect[wire.HOST], expect[wire.EPOCH],
                                expect[wire.DRAINED])
    valid = (isinstance(drained, bool) and
             (epoch is None or wire.is_epoch(epoch)) and
             (host is None or wire.is_host(host)) and
             not (drained and epoch is None) and
             not (host is None and (epoch is not None or drained)))
    if not valid:
        raise webob.exc.HTTPBadRequest(
            explanation="'expect' is null (no marker) or {'host': <compute "
                        "host name>, 'epoch': <attachment id> or null, "
                        "'drained': true|false}: the marker the caller "
                        "read, as volume show returns it")
    return None if host is None else {'host': host, 'epoch': epoch,
                                      'drained': drained}


class FenceController(wsgi.Controller):
    """Volume actions to set/clear the fence, and the show attribute."""

    def __init__(self):
        super().__init__()
        self.volume_api = cinder_volume.API()

    @staticmethod
    def _authorize(req, rule: str, fatal: bool = True) -> bool:
        """Check ``rule`` with cinder's enforcer (our rules registered)."""
        register_policies()
        context = req.environ['cinder.context']
        try:
            return bool(context.authorize(
                rule, target={'project_id': context.project_id},
                fatal=fatal))
        except exception.PolicyNotAuthorized:
            raise webob.exc.HTTPForbidden(
                explanation='Policy %s does not allow this request to '
                            'change the os-brick-cas fence marker (default: '
                            'admin or service role; see cinder\'s policy '
                            'file).' % rule)

    def _admin_context(self, req, rule: str):
        self._authorize(req, rule)
        return req.environ['cinder.context']

    @wsgi.action(wire.SET_ACTION)
    def _set_fence(self, req, id, body):
        context = self._admin_context(req, policies.SET)
        params = self._params(body, wire.SET_ACTION)
        host = params.get(wire.HOST)
        epoch = params.get(wire.EPOCH, '')
        drained = params.get(wire.DRAINED, False)
        if (not wire.is_host(host) or
                not (epoch == '' or wire.is_epoch(epoch)) or
                not isinstance(drained, bool) or (drained and not epoch)):
            raise webob.exc.HTTPBadRequest(
                explanation="'%s' needs {'host': <compute host name>[, "
                            "'epoch': <attachment id>[, 'drained': "
                            "true|false]][, 'expect': ...]}" % wire.SET_ACTION)

        def change(admin, marker: guards.Marker) -> None:
            # the drained flag goes first: a reader between the two
            # writes sees the stronger "not drained"
            if not drained:
                self._delete_keys(admin, id, guards.FENCE_DRAINED_KEY)
            keys = {guards.FENCE_KEY: host, guards.FENCE_EPOCH_KEY: epoch}
            if drained:
                # that attachment's host flushed the volume and keeps it
                # from getting dirty: another host may take the marker over
                keys[guards.FENCE_DRAINED_KEY] = epoch
            db.volume_admin_metadata_update(admin, id, keys, False)

        return self._swap(context, id, _expected(params), change)

    @wsgi.action(wire.CLEAR_ACTION)
    def _clear_fence(self, req, id, body):
        context = self._admin_context(req, policies.CLEAR)
        params = self._params(body, wire.CLEAR_ACTION)
        lost = params.get(wire.LOST, False)
        if not isinstance(lost, bool):
            raise webob.exc.HTTPBadRequest(
                explanation="'%s' takes {'lost': true|false[, 'expect': "
                            "...]}" % wire.CLEAR_ACTION)

        def change(admin, marker: guards.Marker) -> None:
            if lost and marker.host:
                # what os-brick-cas discard checks before dropping that
                # host's stale cached data of this volume
                db.volume_admin_metadata_update(admin, id, {
                    guards.FENCE_LOST_KEY: marker.lost_with_owner()}, False)
            # the host goes last: no reader sees a weaker marker first
            self._delete_keys(admin, id, guards.FENCE_DRAINED_KEY,
                              guards.FENCE_EPOCH_KEY, guards.FENCE_KEY)

        return self._swap(context, id, _expected(params), change)

    @staticmethod
    def _params(body: Any, action: str) -> dict:
        params = (body or {}).get(action) or {}
        if not isinstance(params, dict):
            raise webob.exc.HTTPBadRequest(
                explanation="'%s' takes an object" % action)
        return params

    @staticmethod
    def _delete_keys(admin, volume_id: str, *keys: str) -> None:
        for key in keys:
            try:
                db.volume_admin_metadata_delete(admin, volume_id, key)
            except exception.VolumeAdminMetadataNotFound:
                pass

    def _swap(self, context, volume_id: str, expected: Any,
              change: Callable[[Any, guards.Marker], None]
              ) -> webob.Response:
        """Run *change* if the marker is *expected* (compare-and-swap).

        Under a per-volume lock of cinder's coordination backend (tooz):
        every cinder-api worker and node that shares the backend reads,
        compares and writes in turn, so of two writers that expect the
        same record, one wins and the other gets 409. The writes are one
        database transaction. 503 if the lock is not had within
        LOCK_TIMEOUT seconds.
        """
        admin = context.elevated()
        try:
            # the policy allowed it on any volume (service users act in
            # their own project)
            volume = self.volume_api.get(admin, volume_id)
        except exception.VolumeNotFound as exc:
            raise webob.exc.HTTPNotFound(explanation=exc.msg)
        lock = coordination.COORDINATOR.get_lock(LOCK_NAME % volume.id)
        if not lock.acquire(blocking=LOCK_TIMEOUT):
            raise webob.exc.HTTPServiceUnavailable(explanation=(
                'The os-brick-cas fence marker of volume %s is being '
                'changed by another request (or cinder\'s coordination '
                'backend does not answer); nothing was changed. Retry.'
                % volume_id))
        try:
            # read under the lock, from the database
            marker = guards.read_marker(volume)
            if expected is not UNCONDITIONAL and marker.record() != expected:
                LOG.info('Fence marker of volume %(vol)s not changed: '
                         'expected %(expected)s, holds %(current)s',
                         {'vol': volume_id, 'expected': expected,
                          'current': marker.record()})
                return webob.Response(status_int=409, json_body={
                    'conflict': {
                        'message': 'The os-brick-cas fence marker of volume '
                                   '%s is not the one expected; nothing was '
                                   'changed.' % volume_id,
                        'current': marker.record()}})
            with compat.main_context_manager().writer.using(admin):
                change(admin, marker)
        finally:
            lock.release()
        return webob.Response(status_int=202)

    def _add_attribute(self, req, resp_volume):
        marker = guards.read_marker(req.get_db_volume(resp_volume['id']))
        resp_volume[wire.ATTRIBUTE] = marker.host
        resp_volume[wire.EPOCH_ATTRIBUTE] = marker.epoch
        resp_volume[wire.LOST_ATTRIBUTE] = wire.LOST_SEPARATOR.join(
            marker.lost)
        resp_volume[wire.DRAINED_ATTRIBUTE] = marker.drained_epoch

    @wsgi.extends
    def show(self, req, resp_obj, id):
        if self._authorize(req, policies.SHOW, fatal=False):
            self._add_attribute(req, resp_obj.obj['volume'])

    @wsgi.extends
    def detail(self, req, resp_obj):
        if self._authorize(req, policies.SHOW, fatal=False):
            for volume in list(resp_obj.obj['volumes']):
                self._add_attribute(req, volume)


def register_policies() -> None:
    """Add our rules to cinder's enforcer (once per enforcer)."""
    cinder_policy.init()
    enforcer = cinder_policy._ENFORCER  # cinder keeps no public getter
    missing = [rule for rule in policies.list_rules()
               if rule.name not in enforcer.registered_rules]
    enforcer.register_defaults(missing)
    for rule in missing:
        # load_rules merges registered defaults only while it reads files;
        # a policy file's own value for the rule, once loaded, wins
        enforcer.rules.setdefault(rule.name, rule.check)


class Fence(extensions.ExtensionDescriptor):
    """os-brick-cas fence marker (which host may hold a volume's writes)."""

    name = 'OsBrickCasFence'
    alias = 'os-brick-cas'
    updated = '2026-11-01T00:00:00+00:00'

    def get_controller_extensions(self):
        return [extensions.ControllerExtension(self, 'volumes',
                                               FenceController()),
                extensions.ControllerExtension(
                    self, 'snapshots', sync_guards.SnapshotGuardController()),
                extensions.ControllerExtension(
                    self, 'backups', sync_guards.BackupGuardController()),
                extensions.ControllerExtension(
                    self, 'volumes', sync_guards.CloneGuardController()),
                extensions.ControllerExtension(
                    self, 'volumes',
                    sync_guards.FencedVolumeGuardController())]
