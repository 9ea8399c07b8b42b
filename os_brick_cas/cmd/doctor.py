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

"""``os-brick-cas doctor``: is this host ready to cache volumes safely?

One line per finding, ``OK``, ``WARN`` or ``FAIL``, each problem with what
to do (or one JSON document with ``--format json``). Exit codes follow
oslo.upgradecheck: 0 all OK, 1 warnings only, 2 at least one failure.
"""

import argparse
import dataclasses
import json
import os
import platform
import shutil
import socket
from typing import Any, Callable, Iterator, Optional

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import args as args_mod
from os_brick_cas.cmd import host as host_cmd
from os_brick_cas.cmd import releases
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas import fence
from os_brick_cas import opencas_conf
from os_brick_cas import opts
from os_brick_cas import policy as policy_mod
from os_brick_cas import report

CONF = cfg.CONF
OK, WARN, FAIL = 'OK', 'WARN', 'FAIL'
#: exit code per worst finding (oslo.upgradecheck's Code values)
EXIT_CODES = {OK: 0, WARN: 1, FAIL: 2}

#: set by cinder_ext.admin when installed: returns a FenceClient, or None
#: when no Cinder credentials are configured (owners are then not checked)
OWNER_SOURCE: Optional[Callable[[], Any]] = None


@dataclasses.dataclass
class Finding:
    level: str
    message: str

    def __str__(self) -> str:
        return '%-4s %s' % (self.level, self.message)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'doctor', help='check casadm, module, kernel, cache instances, cores '
                       'and configuration; exit 0 OK, 1 warnings, 2 failures')
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table', help='output format')
    args_mod.add_host_argument(parser)
    parser.set_defaults(func=run)


def check_host(casadm: casadm_mod.Casadm, conf: cfg.ConfigOpts = CONF
               ) -> Iterator[Finding]:
    """Every finding about this host, in the order an operator fixes them."""
    if not shutil.which('casadm'):
        yield Finding(FAIL, 'casadm not found on PATH: install Open CAS '
                            '(https://open-cas.github.io) on this host.')
        return
    try:
        versions = casadm.version()
        caches = casadm.list_caches()
    except exception.CasModuleNotLoaded:
        yield Finding(FAIL, 'the Open CAS kernel module is not loaded: run '
                            '"modprobe cas_cache" (and check dmesg if it '
                            'fails).')
        yield from _check_stopped_caches(None, conf[opts.GROUP].opencas_conf)
        return
    except exception.CasError as exc:
        yield Finding(FAIL, 'casadm does not answer: %s' % exc)
        return
    yield Finding(OK, 'casadm %s, kernel module %s' % (
        versions.get('CAS CLI Utility', '?'),
        versions.get('CAS Cache Kernel Module', '?')))
    cli_ok, cli_message = releases.check_cli(
        versions.get('CAS CLI Utility', ''))
    if not cli_ok:
        yield Finding(FAIL, cli_message)
    module_version = versions.get('CAS Cache Kernel Module', '')
    supported, message = releases.check_kernel(platform.release(),
                                               module_version)
    yield Finding(OK if supported else FAIL, message)

    group = conf[opts.GROUP]
    try:
        policy = policy_mod.CachePolicy.from_conf(conf)
    except exception.CasError as exc:
        yield Finding(FAIL, 'configuration: %s' % exc)
        return
    if not policy.instances:
        yield Finding(FAIL, '[os_brick_cas] cache_instances is empty: set '
                            'it to the instance of each offered mode, e.g. '
                            '"wt:1,wb:2".')
    problems = policy.problems(caches)
    for mode, cache_id in sorted(policy.instances.items(),
                                 key=lambda item: item[1]):
        if mode in problems:
            yield Finding(FAIL, 'mode %s -> cache instance %d: %s' % (
                mode.value, cache_id, problems[mode]))
        else:
            yield Finding(OK, 'mode %s -> cache instance %d is running in '
                              'mode %s' % (mode.value, cache_id, mode.value))
    yield from _check_stopped_caches(caches, group.opencas_conf)
    yield from _check_persistence(policy, caches, group.opencas_conf)
    yield from _check_cores(casadm, policy, caches)
    yield from _check_drain(casadm, policy, caches)
    yield from (Finding(*f) for f in host_cmd.doctor_findings(casadm, conf))
    if group.fallback_policy != opts.FALLBACK_FAIL:
        yield Finding(OK, 'fallback_policy=%s: volumes whose mode is not '
                          'served here attach %s' % (
                              group.fallback_policy,
                              'uncached' if group.fallback_policy ==
                              opts.FALLBACK_UNCACHED else
                              'in a clean mode (wt/wa/pt)'))


def _check_stopped_caches(caches: Optional[list[casadm_mod.CacheInstance]],
                          conf_path: str) -> Iterator[Finding]:
    """Cores opencas.conf lists in caches that are not running."""
    try:
        listed = opencas_conf.read(conf_path)
    except (OSError, exception.CasError):
        return  # reported by _check_persistence
    running = (None if caches is None
               else {cache.cache_id for cache in caches})
    for cache_id, core_id, device in listed.rows_of_stopped_caches(running):
        _, volume_id = report.rbd_image_of(device)
        yield Finding(FAIL, 'volume %s: %s lists it as core %d of cache '
                            'instance %d, which is not running, so that '
                            'cache may hold its newest data; attach and '
                            'detach of the volume are refused. Start the '
                            'cache (casctl start) so the core is reloaded.'
                            % (volume_id or device, conf_path, core_id,
                               cache_id))


def _check_persistence(policy: policy_mod.CachePolicy,
                       caches: list[casadm_mod.CacheInstance],
                       conf_path: str) -> Iterator[Finding]:
    dirty_modes = [(mode, cache_id) for mode, cache_id in
                   policy.instances.items() if mode.holds_dirty_data]
    if not dirty_modes:
        return
    try:
        listed = opencas_conf.read(conf_path)
    except (OSError, exception.CasError) as exc:
        yield Finding(FAIL, 'cannot read %s (%s): write-back/write-only '
                            'instances must be listed there so a reboot '
                            'reloads their dirty data.' % (conf_path, exc))
        return
    for mode, cache_id in dirty_modes:
        if listed.lists_cache(cache_id):
            yield Finding(OK, 'cache instance %d (%s) is in %s, a reboot '
                              'reloads it' % (cache_id, mode.value,
                                              conf_path))
        else:
            yield Finding(FAIL, 'cache instance %d holds %s data but is not '
                                'listed under [caches] in %s: a reboot would '
                                'not reload its dirty data. Add it (see '
                                'etc/opencas/opencas.conf.example).' % (
                                    cache_id, mode.value, conf_path))
    present = {(core.cache_id, core.core_id)
               for cache in caches for core in cache.cores}
    running = {cache.cache_id for cache in caches}
    for (cache_id, core_id), device in sorted(listed.cores.items()):
        if cache_id in running and (cache_id, core_id) not in present:
            yield Finding(WARN, '%s lists core %d of instance %d (%s), '
                                'which the instance does not have: a stale '
                                'row; remove it.' % (conf_path, core_id,
                                                     cache_id, device))


def _check_cores(casadm: casadm_mod.Casadm, policy: policy_mod.CachePolicy,
                 caches: list[casadm_mod.CacheInstance]
                 ) -> Iterator[Finding]:
    ours = set(policy.instances.values())
    for cache in caches:
        for core in cache.cores:
            _, volume_id = report.rbd_image_of(core.device)
            if not core.active:
                # statistics (one casadm call) only where they are reported
                core_report = report.core_report(casadm, core)
                yield Finding(WARN, 'core %d of instance %d (volume %s) is '
                                    'inactive with %s dirty blocks of '
                                    'attachment %s: its RBD device is '
                                    'missing (host reboot?). Check with '
                                    '"os-brick-cas owners" who owns the '
                                    'volume now; if this host does, start '
                                    'the server using it, or detach the '
                                    'volume: both map it again and flush.'
                                    % (core.core_id, cache.cache_id,
                                       volume_id or core.device,
                                       core_report.dirty_blocks,
                                       core_report.attachment or 'unknown'))
            elif volume_id is None:
                yield Finding(WARN, 'core %d of instance %d (%s) is not a '
                                    'Cinder RBD volume; os-brick-cas leaves '
                                    'it alone.' % (core.core_id,
                                                   cache.cache_id,
                                                   core.device))
            elif not os.path.exists(core.device):
                yield Finding(WARN, 'core %d of instance %d: %s is gone '
                                    'although the core is active; check '
                                    '"rbd showmapped" and the udev rule.' % (
                                        core.core_id, cache.cache_id,
                                        core.device))
            if cache.cache_id not in ours and volume_id:
                yield Finding(WARN, 'volume %s is cached by instance %d, '
                                    'which [os_brick_cas] cache_instances '
                                    'does not name: an orphan from an older '
                                    'configuration; detach and re-attach '
                                    'it.' % (volume_id, cache.cache_id))


def _check_drain(casadm: casadm_mod.Casadm, policy: policy_mod.CachePolicy,
                 caches: list[casadm_mod.CacheInstance]
                 ) -> Iterator[Finding]:
    """Per offered wb/wo instance: can its cores be drained here?"""
    running = {cache.cache_id: cache for cache in caches}
    for mode, cache_id in sorted(policy.instances.items(),
                                 key=lambda item: item[1]):
        if not mode.holds_dirty_data:
            continue
        cache = running.get(cache_id)
        reason = (drain.unsupported_reason(casadm, cache) if cache else
                  'cache instance %d is not running.' % cache_id)
        if reason is None:
            yield Finding(OK, 'instance %d can drain (live migration of '
                              'write-back volumes allowed)' % cache_id)
        else:
            yield Finding(WARN, 'instance %d (%s) cannot drain, so its '
                                'volumes cannot live-migrate: %s' % (
                                    cache_id, mode.value, reason))


def owner_client() -> tuple[Any, Optional[str]]:
    """(FenceClient or None, why Cinder cannot be asked, or None)."""
    try:
        return (OWNER_SOURCE() if OWNER_SOURCE else None), None
    except (SystemExit, Exception) as exc:
        return None, str(exc)


def check_owners(casadm: casadm_mod.Casadm, host: str
                 ) -> Iterator[Finding]:
    """Who owns each cached volume's newest data now (asks Cinder)."""
    client, problem = owner_client()
    if problem:
        yield Finding(WARN, 'cannot ask Cinder who owns the cached volumes '
                            '(%s); "os-brick-cas owners" needs the same '
                            'credentials.' % problem)
        return
    if client is None:
        yield Finding(OK, 'owners not checked: no Cinder credentials '
                          '(set OS_CLOUD or OS_AUTH_URL to compare each '
                          "volume's cached data with Cinder's owner)")
        return
    for cache in report.host_report(casadm):
        for core in cache.cores:
            if not core.volume_id or not (core.dirty_blocks or
                                          core.status == 'Inactive'):
                continue
            judged = fence.judge(client, core.volume_id, core.attachment,
                                 core.dirty_blocks, host)
            level = (OK if judged.verdict in ('owner: this host', 'clean')
                     else FAIL if judged.verdict.startswith('NO OWNER')
                     else WARN)
            yield Finding(level, 'volume %s: core %d of instance %d, %s '
                                 'dirty blocks of attachment %s; Cinder '
                                 'names %s as owner: %s (see "os-brick-cas '
                                 'owners" and the ownership runbooks)' % (
                                     core.volume_id, core.core_id,
                                     core.cache_id, core.dirty_blocks,
                                     core.attachment or 'unknown',
                                     judged.owner_label
                                     if judged.owner else 'nobody',
                                     judged.verdict))


def exit_code(findings: list[Finding]) -> int:
    """0 all OK, 1 warnings only, 2 any failure (oslo.upgradecheck)."""
    return max((EXIT_CODES[f.level] for f in findings), default=0)


def run(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    findings = list(check_host(casadm))
    if not any(f.message.startswith(('casadm not found', 'the Open CAS '
                                     'kernel module is not loaded',
                                     'casadm does not answer'))
               for f in findings):
        findings += list(check_owners(
            casadm, getattr(args, 'host', None) or socket.gethostname()))
    code = exit_code(findings)
    if getattr(args, 'format', 'table') == 'json':
        print(json.dumps({
            'result': {0: OK, 1: WARN, 2: FAIL}[code],
            'exit_code': code,
            'findings': [dataclasses.asdict(f) for f in findings],
        }, indent=2))
        return code
    for finding in findings:
        print(finding)
    bad = [f for f in findings if f.level != OK]
    print('%d finding(s) need attention' % len(bad) if bad else
          'all checks passed')
    return code
