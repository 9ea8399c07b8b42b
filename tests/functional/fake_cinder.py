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

"""Cinder's fence marker at the HTTP boundary, for host-library tests.

The real python-cinderclient talks to a requests-mock adapter that keeps
the marker keys per volume with the API's semantics: ``expect`` makes a
set or clear conditional (409 when the marker differs), and ``down``
makes every request fail with 503 (Cinder unreachable).
"""

import json
import re
from typing import Optional

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import requests
import requests_mock

from os_brick_cas import fence
from os_brick_cas import fence_wire as wire

CINDER = 'http://cinder.fake/v3'
UNAVAILABLE = {'serviceUnavailable': {'message': 'Cinder is down',
                                      'code': 503}}


def session(adapter: requests_mock.Adapter, endpoint: str = CINDER
            ) -> ks_session.Session:
    """A keystoneauth session whose Cinder (*endpoint*) is *adapter*."""
    http = requests.Session()
    http.mount('http://cinder.fake/', adapter)
    return ks_session.Session(
        session=http, auth=token_endpoint.Token(endpoint, 'admin'))


class FakeCinder(object):
    """Volume show + fence actions; ``down`` = 503 for everything."""

    def __init__(self):
        #: volume id -> {'host', 'epoch', 'drained'}
        self.markers: dict[str, dict] = {}
        self.lost: dict[str, list[str]] = {}
        self.down = False
        #: every marker change, in order: (volume, marker or None)
        self.history: list[tuple[str, Optional[dict]]] = []
        self.adapter = requests_mock.Adapter()
        self.adapter.register_uri(
            'GET', re.compile(CINDER + '/volumes/[^/]+$'), json=self._show)
        self.adapter.register_uri(
            'POST', re.compile(CINDER + '/volumes/[^/]+/action$'),
            text=self._action)

    def owner(self, volume_id: str) -> Optional[fence.Owner]:
        marker = self.markers.get(volume_id)
        if marker is None:
            return None
        return fence.Owner(marker['host'], marker.get('epoch'),
                           bool(marker.get('drained')))

    def _unavailable(self, context) -> bool:
        if self.down:
            context.status_code = 503
        return self.down

    def _show(self, request, context):
        if self._unavailable(context):
            return UNAVAILABLE
        volume_id = request.path.rstrip('/').split('/')[-1]
        marker = self.markers.get(volume_id) or {}
        return {'volume': {
            'id': volume_id,
            wire.ATTRIBUTE: marker.get('host'),
            wire.EPOCH_ATTRIBUTE: marker.get('epoch'),
            wire.LOST_ATTRIBUTE: ','.join(self.lost.get(volume_id, [])),
            wire.DRAINED_ATTRIBUTE: (marker.get('epoch')
                                     if marker.get('drained') else None)}}

    def _expected(self, volume_id: str, params: dict) -> bool:
        if 'expect' not in params:
            return True
        expect = params['expect']
        current = self.owner(volume_id)
        if expect is None:
            return current is None
        return current == fence.Owner(expect['host'], expect.get('epoch'),
                                      bool(expect.get('drained')))

    def _action(self, request, context):
        if self._unavailable(context):
            return json.dumps(UNAVAILABLE)
        volume_id = request.path.split('/')[-2]
        body = request.json()
        [(action, params)] = body.items()
        params = params or {}
        if not self._expected(volume_id, params):
            context.status_code = 409
            current = self.markers.get(volume_id)
            return json.dumps({'conflict': {
                'message': 'the fence marker changed', 'current': current}})
        context.status_code = 202
        if action == wire.SET_ACTION:
            marker = {'host': params['host'], 'epoch': params.get('epoch'),
                      'drained': bool(params.get('drained'))}
            self.markers[volume_id] = marker
        elif action == wire.CLEAR_ACTION:
            marker = self.markers.pop(volume_id, None)
            if params.get('lost') and marker:
                self.lost.setdefault(volume_id, []).append(
                    '%s/%s' % (marker['host'], marker.get('epoch') or ''))
            marker = None
        self.history.append((volume_id, marker))
        return ''

    def session(self) -> ks_session.Session:
        return session(self.adapter)

    def client(self) -> fence.FenceClient:
        from cinderclient import client as cinder_client
        return fence.FenceClient(cinder_client.Client(
            '3', session=self.session(), retries=0))


class FaultyCinder(FakeCinder):
    """A FakeCinder whose next calls meet the fates queued in ``faults``.

    Each call (a show or an action) takes the next fate, None being a
    normal answer:

    * ``error``: 503, nothing changed;
    * ``timeout``: no answer (a read timeout), nothing changed;
    * ``lost``: an action is applied, its answer lost (a read timeout
      after the compare-and-swap took effect); a show times out;
    * ``killed``: an action is applied, then the calling process dies
      (*killed*, a BaseException, is raised in it); a show kills it
      before Cinder sees anything.
    """

    FATES = ('error', 'timeout', 'lost', 'killed')

    def __init__(self, killed: type = SystemExit):
        super().__init__()
        self.killed = killed
        #: fates of the next calls, in order
        self.faults: list[Optional[str]] = []

    def _fate(self) -> Optional[str]:
        return self.faults.pop(0) if self.faults else None

    def _show(self, request, context):
        fate = None if self.down else self._fate()
        if fate == 'error':
            context.status_code = 503
            return UNAVAILABLE
        if fate in ('timeout', 'lost'):
            raise requests.exceptions.ReadTimeout('Cinder did not answer')
        if fate == 'killed':
            raise self.killed('killed before Cinder answered a show')
        return super()._show(request, context)

    def _action(self, request, context):
        fate = None if self.down else self._fate()
        if fate == 'error':
            context.status_code = 503
            return json.dumps(UNAVAILABLE)
        if fate == 'timeout':
            raise requests.exceptions.ReadTimeout('Cinder did not answer')
        answer = super()._action(request, context)
        if fate == 'lost':
            raise requests.exceptions.ReadTimeout(
                'Cinder applied the change; its answer was lost')
        if fate == 'killed':
            raise self.killed('killed after Cinder applied a change')
        return answer
