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

"""doctor's check of who owns each cached volume's newest data (Cinder)."""

from typing import Any, Iterator, Optional

from os_brick_cas.cmd.checks import FAIL
from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import NotChecked
from os_brick_cas.cmd.checks import OK
from os_brick_cas.cmd.checks import register
from os_brick_cas.cmd.checks import WARN
from os_brick_cas.cmd import cinder_session
from os_brick_cas import fence
from os_brick_cas import report

UNREACHABLE = ('cannot ask Cinder who owns the cached volumes (%s). Check '
               'that Keystone and Cinder (OS_AUTH_URL / clouds.yaml) are up '
               'and reachable from this host, then run doctor again; until '
               'then do not move or discard volumes with dirty data here.')


def owner_client() -> tuple[Any, Optional[str]]:
    """(FenceClient or None without credentials, why Cinder is unusable).

    Asked of :func:`cinder_session.owner_source` on every call, whichever
    verbs the CLI loaded before.
    """
    try:
        return cinder_session.owner_source(), None
    except (SystemExit, Exception) as exc:
        return None, describe(exc)


def describe(exc: BaseException) -> str:
    """A one-line reason from a client or keystoneauth error."""
    return '%s: %s' % (type(exc).__name__, exc)


def judge(client: Any, core: report.CoreReport, host: str
          ) -> fence.Judgement:
    """Cinder's verdict on *core*; ``Unreachable`` when it cannot answer."""
    try:
        return fence.judge(client, core.volume_id, core.attachment,
                           core.dirty_blocks, host)
    except Exception as exc:
        raise Unreachable(describe(exc)) from exc


class Unreachable(Exception):
    """Keystone or Cinder did not answer (down, refused, timed out)."""


@register('owners')
def owners(host: Host) -> Iterator[Finding]:
    """Who owns each dirty or inactive cached volume's newest data now."""
    client, problem = owner_client()
    if problem:
        yield Finding(WARN, UNREACHABLE % problem)
        return
    if client is None:
        raise NotChecked('no Cinder credentials (set OS_CLOUD or '
                         "OS_AUTH_URL to compare each volume's cached data "
                         "with Cinder's owner)")
    host.caches()   # NotChecked when casadm does not answer
    for cache in report.host_report(host.casadm):
        for core in cache.cores:
            if not core.volume_id or not (core.dirty_blocks or
                                          core.status == 'Inactive'):
                continue
            try:
                judged = judge(client, core, host.host)
            except Unreachable as exc:
                yield Finding(WARN, UNREACHABLE % exc,
                              volume_id=core.volume_id)
                return
            level = (OK if judged.verdict in ('owner: this host', 'clean')
                     else FAIL if judged.verdict.startswith('NO OWNER')
                     else WARN)
            yield Finding(level, 'volume %s: %s, %s dirty blocks of '
                                 'attachment %s; Cinder names %s as owner: '
                                 '%s (see "os-brick-cas owners" and the '
                                 'ownership runbooks)' % (
                                     core.volume_id, core.label,
                                     core.dirty_blocks,
                                     core.attachment or 'unknown',
                                     judged.owner_label
                                     if judged.owner else 'nobody',
                                     judged.verdict),
                          volume_id=core.volume_id, cache_id=core.cache_id,
                          core_id=core.core_id)
