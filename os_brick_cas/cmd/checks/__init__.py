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

"""The registry of ``os-brick-cas doctor``'s checks.

A check is a small function of the :class:`Host` being examined that
yields :class:`Finding` objects; one decorator line registers it::

    @checks.register('drift')
    def drift(host: checks.Host) -> Iterator[checks.Finding]:
        ...

Checks run module by module in :data:`MODULES` order (then any other
module's), each module's in registration order. A check that cannot run
(casadm absent, no configuration, no Cinder credentials) raises
:class:`NotChecked` and is reported as ``SKIP`` with the reason, never as
``OK``. The check id is stable: scripts
read it from ``doctor --format json``.
"""

import dataclasses
import functools
import importlib
from typing import Any, Callable, Iterable, Optional

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas.opencas import casadm_output
from os_brick_cas import policy as policy_mod

OK, WARN, FAIL, SKIP, ERROR = 'OK', 'WARN', 'FAIL', 'SKIP', 'ERROR'
#: exit code per level: oslo.upgradecheck's Code, 255 for a crashed check
EXIT_CODES = {OK: upgradecheck.Code.SUCCESS.value,
              SKIP: upgradecheck.Code.SUCCESS.value,
              WARN: upgradecheck.Code.WARNING.value,
              FAIL: upgradecheck.Code.FAILURE.value,
              ERROR: 255}
#: modules whose import registers checks, in the order they run
MODULES = ['os_brick_cas.cmd.checks.host',
           'os_brick_cas.cmd.checks.locking',
           'os_brick_cas.cmd.checks.shared_dirs',
           'os_brick_cas.cmd.checks.instances',
           'os_brick_cas.cmd.checks.shares',
           'os_brick_cas.cmd.checks.owners',
           'os_brick_cas.cmd.checks.hostprep',
           'os_brick_cas.cmd.checks.lifecycle']


@dataclasses.dataclass
class Finding:
    """One line of doctor: a level, what was found and what to do."""

    level: str
    message: str
    check: str = ''
    volume_id: Optional[str] = None
    cache_id: Optional[int] = None
    core_id: Optional[int] = None

    def __str__(self) -> str:
        return '%-4s %s' % (self.level, self.message)


class NotChecked(Exception):
    """A check could not run; the message says why (a ``SKIP``)."""


@dataclasses.dataclass
class Host:
    """What checks examine: casadm, the configuration, this host's name."""

    casadm: casadm_mod.Casadm
    conf: cfg.ConfigOpts
    host: str
    config_files: list[str]

    @functools.cached_property
    def _listing(self) -> Any:
        try:
            return self.casadm.version(), self.casadm.list_caches()
        except exception.CasError as exc:
            return exc

    def casadm_error(self) -> Optional[exception.CasError]:
        """Why casadm did not answer ``-V``/``-L``, or None."""
        return (self._listing if isinstance(self._listing, Exception)
                else None)

    def versions(self) -> dict[str, str]:
        """``casadm -V`` (NotChecked when casadm does not answer)."""
        return self._answer()[0]

    def caches(self) -> list[casadm_output.CacheInstance]:
        """``casadm -L`` (NotChecked when casadm does not answer)."""
        return self._answer()[1]

    def caches_if_any(self) -> Optional[list[casadm_output.CacheInstance]]:
        """The running instances, or None when casadm cannot tell."""
        try:
            return self.caches()
        except NotChecked:
            return None

    def _answer(self) -> tuple[dict[str, str], list[Any]]:
        if isinstance(self._listing, Exception):
            raise NotChecked('casadm does not answer (%s)' % self._listing)
        return self._listing

    def policy(self) -> policy_mod.CachePolicy:
        """The mode -> instance policy (NotChecked without any)."""
        try:
            policy = policy_mod.CachePolicy.from_conf(self.conf)
        except exception.CasError as exc:
            raise NotChecked('the configuration is invalid (%s)' % exc)
        if not policy.instances:
            raise NotChecked('no cache_instances configured')
        return policy


Check = Callable[[Host], Iterable[Finding]]
#: (check id, function), in the order they run
REGISTRY: list[tuple[str, Check]] = []


def register(check_id: str) -> Callable[[Check], Check]:
    """Decorator: add a check to doctor under a stable id."""
    def add(func: Check) -> Check:
        if any(known == check_id for known, _ in REGISTRY):
            raise ValueError('doctor check %r registered twice' % check_id)
        REGISTRY.append((check_id, func))
        return func
    return add


def load() -> list[tuple[str, Check]]:
    """Every registered check in running order (imports :data:`MODULES`)."""
    for name in MODULES:
        importlib.import_module(name)

    def module_rank(entry: tuple[str, Check]) -> int:
        module = entry[1].__module__
        return MODULES.index(module) if module in MODULES else len(MODULES)
    return sorted(REGISTRY, key=module_rank)


def run(host: Host) -> list[Finding]:
    """Run every check; a crashing check is an ``ERROR`` finding (255)."""
    findings = []
    for check_id, func in load():
        try:
            found = list(func(host))
        except NotChecked as exc:
            found = [Finding(SKIP, '%s: not checked: %s' % (check_id, exc))]
        except Exception as exc:  # an internal error: exit 255, say which
            found = [Finding(ERROR, '%s: the check crashed (%s: %s); '
                                    'report it with "os-brick-cas --debug '
                                    'doctor"' % (check_id,
                                                 type(exc).__name__, exc))]
        for finding in found:
            finding.check = finding.check or check_id
        findings += found
    return findings


def exit_code(findings: list[Finding]) -> int:
    """0 OK, 1 warnings only, 2 any failure (oslo.upgradecheck), 255 crash."""
    return max((EXIT_CODES[f.level] for f in findings), default=0)
