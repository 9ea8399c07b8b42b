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
overridable in cinder's policy file. The same extension refuses snapshots
and backups of attached write-back volumes, and retype/migration/unmanage
of fenced volumes, synchronously (400) at the API
(:mod:`cinder_ext.api.sync_guards`). Enable it in cinder.conf::

    [DEFAULT]
    osapi_volume_extension = cinder.api.contrib.standard_extensions
    osapi_volume_extension = cinder_ext.api.fence.Fence
"""

import re

from cinder.api import extensions
from cinder.api.openstack import wsgi
from cinder.db import api as db
from cinder import exception
from cinder import policy as cinder_policy
from cinder import volume as cinder_volume
import webob

from cinder_ext.api import sync_guards
from cinder_ext import guards
from cinder_ext import policies

SET_ACTION = 'os-brick-cas-set-fence'
CLEAR_ACTION = 'os-brick-cas-clear-fence'
ATTRIBUTE = 'os-brick-cas:fence'
EPOCH_ATTRIBUTE = 'os-brick-cas:fence-epoch'
LOST_ATTRIBUTE = 'os-brick-cas:fence-lost'
DRAINED_ATTRIBUTE = 'os-brick-cas:fence-drained'
_HOST = re.compile(r'^[A-Za-z0-9_.:@-]{1,255}$')
_EPOCH = re.compile(r'^[A-Za-z0-9-]{1,64}$')


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

    @wsgi.action(SET_ACTION)
    def _set_fence(self, req, id, body):
        context = self._admin_context(req, policies.SET)
        params = body.get(SET_ACTION) or {}
        host = params.get('host')
        epoch = params.get('epoch', '')
        drained = params.get('drained', False)
        if (not isinstance(host, str) or not _HOST.fullmatch(host) or
                not isinstance(epoch, str) or
                (epoch and not _EPOCH.fullmatch(epoch)) or
                not isinstance(drained, bool) or (drained and not epoch)):
            raise webob.exc.HTTPBadRequest(
                explanation="'%s' needs {'host': <compute host name>[, "
                            "'epoch': <attachment id>[, 'drained': "
                            "true|false]]}" % SET_ACTION)
        try:
            # the policy allowed it on any volume (service users act in
            # their own project)
            volume = self.volume_api.get(context.elevated(), id)
        except exception.VolumeNotFound as exc:
            raise webob.exc.HTTPNotFound(explanation=exc.msg)
        self.volume_api.update_volume_admin_metadata(
            context.elevated(), volume, {guards.FENCE_KEY: host,
                                         guards.FENCE_EPOCH_KEY: epoch})
        if drained:
            # that attachment's host flushed the volume and keeps it from
            # getting dirty: another host may take the marker over
            self.volume_api.update_volume_admin_metadata(
                context.elevated(), volume, {guards.FENCE_DRAINED_KEY: epoch})
        else:
            self._delete_keys(context, id, guards.FENCE_DRAINED_KEY)
        return webob.Response(status_int=202)

    @staticmethod
    def _delete_keys(context, volume_id: str, *keys: str) -> None:
        for key in keys:
            try:
                db.volume_admin_metadata_delete(context.elevated(),
                                                volume_id, key)
            except exception.VolumeAdminMetadataNotFound:
                pass

    @wsgi.action(CLEAR_ACTION)
    def _clear_fence(self, req, id, body):
        context = self._admin_context(req, policies.CLEAR)
        lost = (body.get(CLEAR_ACTION) or {}).get('lost', False)
        if not isinstance(lost, bool):
            raise webob.exc.HTTPBadRequest(
                explanation="'%s' takes {'lost': true|false}" % CLEAR_ACTION)
        try:
            volume = self.volume_api.get(context.elevated(), id)
        except exception.VolumeNotFound as exc:
            raise webob.exc.HTTPNotFound(explanation=exc.msg)
        host = guards.fence_host(volume)
        if lost and host:
            # what os-brick-cas discard checks before dropping that
            # host's stale cached data of this volume
            self.volume_api.update_volume_admin_metadata(
                context.elevated(), volume, {guards.FENCE_LOST_KEY: (
                    guards.with_lost(volume, host,
                                     guards.fence_epoch(volume)))})
        self._delete_keys(context, id, guards.FENCE_KEY,
                          guards.FENCE_EPOCH_KEY, guards.FENCE_DRAINED_KEY)
        return webob.Response(status_int=202)

    def _add_attribute(self, req, resp_volume):
        db_volume = req.get_db_volume(resp_volume['id'])
        resp_volume[ATTRIBUTE] = guards.fence_host(db_volume)
        resp_volume[EPOCH_ATTRIBUTE] = guards.fence_epoch(db_volume)
        resp_volume[LOST_ATTRIBUTE] = ','.join(guards.fence_lost(db_volume))
        resp_volume[DRAINED_ATTRIBUTE] = guards.fence_drained(db_volume)

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
                    self, 'volumes',
                    sync_guards.FencedVolumeGuardController())]
