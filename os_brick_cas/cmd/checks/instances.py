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

"""doctor's checks of the cache instances and the volumes they cache."""

import os
from typing import Iterator

from os_brick_cas.cmd.checks import FAIL
from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import NotChecked
from os_brick_cas.cmd.checks import OK
from os_brick_cas.cmd.checks import register
from os_brick_cas.cmd.checks import WARN
from os_brick_cas import drain
from os_brick_cas import exception
from os_brick_cas import labels
from os_brick_cas.opencas import known_defects
from os_brick_cas.opencas import opencas_conf
from os_brick_cas.opencas import releases
from os_brick_cas import opts
from os_brick_cas import report


@register('cache-instances')
def cache_instances(host: Host) -> Iterator[Finding]:
    """Each configured mode's instance runs, complete, in that mode."""
    policy = host.policy()
    caches = host.caches()
    by_id = {cache.cache_id: cache for cache in caches}
    problems = policy.problems(caches)
    for mode, cache_id in sorted(policy.instances.items(),
                                 key=lambda item: item[1]):
        cache = by_id.get(cache_id)
        if mode in problems:
            yield Finding(FAIL, 'mode %s -> cache instance %d: %s' % (
                mode.value, cache_id, problems[mode]), cache_id=cache_id)
        elif cache is not None and cache.status == 'Incomplete':
            inactive = [core.core_id for core in cache.cores
                        if not core.active]
            yield Finding(FAIL, 'mode %s -> cache instance %d is Incomplete: '
                                'core(s) %s are inactive (their RBD devices '
                                'are missing, e.g. after a reboot) and may '
                                'hold data Ceph does not have. Start the '
                                'servers using those volumes or detach them '
                                '(both map them again and flush); see the '
                                'inactive-core lines below.' % (
                                    mode.value, cache_id,
                                    ', '.join(map(str, inactive)) or '?'),
                          cache_id=cache_id)
        else:
            yield Finding(OK, 'mode %s -> cache instance %d is running in '
                              'mode %s' % (mode.value, cache_id, mode.value),
                          cache_id=cache_id)


@register('opencas-defects')
def opencas_defects(host: Host) -> Iterator[Finding]:
    """Known defects of the loaded Open CAS module, fixed by its build or not.

    Data-loss defects also fail the modes they hurt (cache-instances);
    crash defects are warnings.
    """
    module = known_defects.loaded_module(host.conf)
    if module.version is None:
        raise NotChecked(module.note)
    release = releases.major_minor(module.version)
    present = [defect for defect in known_defects.DEFECTS
               if defect.affects(release)]
    if not present:
        yield Finding(OK, 'Open CAS %s has no defect os-brick-cas knows of'
                      % module.version)
    accepted = host.conf[opts.GROUP].accepted_data_loss_defects
    for defect in present:
        if defect.key in module.fixed:
            yield Finding(OK, 'Open CAS %s: known defect %s is fixed in the '
                              'loaded module (%s)' % (
                                  module.version, defect.key, module.note))
        elif defect.kind == known_defects.CRASH:
            yield Finding(WARN, 'Open CAS %s has known defect %s (%s; %s): '
                                '%s.' % (module.version, defect.key,
                                         defect.summary, module.note,
                                         defect.advice))
        else:
            yield Finding(WARN, 'Open CAS %s has known data-loss defect %s '
                                'in modes %s (%s): %s. Rebuild it with the '
                                "os_brick_cas role's patch series and load "
                                'that module, or run v25.12.2 or v24.9.' % (
                                    module.version, defect.key,
                                    '/'.join(m.value for m in defect.modes),
                                    module.note,
                                    'accepted in [os_brick_cas] '
                                    'accepted_data_loss_defects'
                                    if defect.key in accepted else
                                    'those modes are not offered'))
    yield from _io_scheduler(host)


def _io_scheduler(host: Host) -> Iterator[Finding]:
    """cas_cache's use_io_scheduler: at 0, wt/wa write hits stay dirty."""
    value = known_defects.use_io_scheduler(host.conf)
    if value is None:
        return      # an older module, or not root: nothing to say
    if value == '1':
        yield Finding(OK, 'cas_cache use_io_scheduler=1: write-through and '
                          'write-around write hits reach Ceph at once')
        return
    lazy = known_defects.LAZY_WITHOUT_SCHEDULER
    exposed = [mode.value for mode in host.policy().instances
               if mode in lazy]
    yield Finding(
        FAIL if exposed else WARN,
        'cas_cache is loaded with use_io_scheduler=%s: Open CAS then '
        'serves %s write hits on its write-back fast path, so they stay '
        'dirty in the cache and do not reach Ceph, while the instance still '
        'says it is in that mode (OCF _ocf_core_req_resolve_fast_mode, '
        'v24.9 to v26.03)%s. Load cas_cache with use_io_scheduler=1 (its '
        'default): remove the option from /etc/modprobe.d, stop the '
        'instances ("os-brick-cas host stop" flushes them first), reload '
        'the module and run "os-brick-cas host apply".' % (
            value, ' and '.join(mode.value for mode in lazy),
            '; this host serves %s ([os_brick_cas] cache_instances)' %
            '/'.join(exposed) if exposed else
            '; no such instance is configured yet'))


@register('stopped-caches')
def stopped_caches(host: Host) -> Iterator[Finding]:
    """Cores opencas.conf lists in caches that are not running."""
    conf_path = host.conf[opts.GROUP].opencas_conf
    if not os.path.isfile(conf_path):
        raise NotChecked('%s does not exist' % conf_path)
    try:
        listed = opencas_conf.read(conf_path)
    except (OSError, exception.CasError):
        return  # reported by the persistence check
    caches = host.caches_if_any()
    running = (None if caches is None
               else {cache.cache_id for cache in caches})
    rows = listed.rows_of_stopped_caches(running)
    if not rows:
        yield Finding(OK, '%s lists no core %s' % (
            conf_path, 'of a stopped cache instance' if caches is not None
            else '(casadm cannot tell which instances run)'))
    for cache_id, core_id, device in rows:
        _, volume_id = report.rbd_image_of(device)
        yield Finding(FAIL, 'volume %s: %s lists it as %s, which is not '
                            'running, so that cache may hold its newest '
                            'data; attach and detach of the volume are '
                            'refused. Start the cache (casctl start) so the '
                            'core is reloaded.'
                            % (volume_id or device, conf_path,
                               labels.core(cache_id, core_id)),
                      volume_id=volume_id, cache_id=cache_id,
                      core_id=core_id)


@register('persistence')
def persistence(host: Host) -> Iterator[Finding]:
    """wb/wo instances are in opencas.conf; no stale core rows."""
    policy = host.policy()
    caches = host.caches()
    conf_path = host.conf[opts.GROUP].opencas_conf
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
                                              conf_path), cache_id=cache_id)
        else:
            yield Finding(FAIL, 'cache instance %d holds %s data but is not '
                                'listed under [caches] in %s: a reboot would '
                                'not reload its dirty data. Add it (see '
                                'etc/opencas/opencas.conf.example).' % (
                                    cache_id, mode.value, conf_path),
                          cache_id=cache_id)
    present = {(core.cache_id, core.core_id)
               for cache in caches for core in cache.cores}
    running = {cache.cache_id for cache in caches}
    for (cache_id, core_id), device in sorted(listed.cores.items()):
        if cache_id in running and (cache_id, core_id) not in present:
            yield Finding(WARN, '%s lists %s (%s), which the instance does '
                                'not have: a stale row; remove it.' % (
                                    conf_path, labels.core(cache_id,
                                                           core_id), device),
                          cache_id=cache_id, core_id=core_id)


@register('cores')
def cores(host: Host) -> Iterator[Finding]:
    """Inactive, foreign, vanished and orphaned cores, with what to do."""
    ours = set(host.policy().instances.values())
    for cache in host.caches():
        for core in cache.cores:
            _, volume_id = report.rbd_image_of(core.device)
            ids = dict(volume_id=volume_id, cache_id=cache.cache_id,
                       core_id=core.core_id)
            if not core.active:
                # statistics (one casadm call) only where they are reported
                core_report = report.core_report(host.casadm, core)
                yield Finding(WARN, '%s (volume %s) is '
                                    'inactive with %s dirty blocks of '
                                    'attachment %s: its RBD device is '
                                    'missing (host reboot?). Check with '
                                    '"os-brick-cas owners" who owns the '
                                    'volume now; if this host does, start '
                                    'the server using it, or detach the '
                                    'volume: both map it again and flush.'
                                    % (core.label,
                                       volume_id or core.device,
                                       core_report.dirty_blocks,
                                       core_report.attachment or 'unknown'),
                              **ids)
            elif volume_id is None:
                yield Finding(WARN, '%s (%s) is not a Cinder RBD volume; '
                                    'os-brick-cas leaves it alone.' % (
                                        core.label, core.device), **ids)
            elif not os.path.exists(core.device):
                yield Finding(WARN, '%s: %s is gone although the core is '
                                    'active; check "rbd showmapped" and the '
                                    'udev rule.' % (core.label, core.device),
                              **ids)
            if cache.cache_id not in ours and volume_id:
                yield Finding(WARN, 'volume %s is cached by instance %d, '
                                    'which [os_brick_cas] cache_instances '
                                    'does not name: an orphan from an older '
                                    'configuration; detach and re-attach '
                                    'it.' % (volume_id, cache.cache_id),
                              **ids)


@register('holders')
def holders(host: Host) -> Iterator[Finding]:
    """Who holds each core's exported device open (as status shows it).

    A held core cannot be removed, so its volume cannot be detached: a
    server's QEMU normally holds its volumes, and keeps holding one whose
    hot-unplug the guest never acknowledged (nova's detach then fails and
    the core keeps its data). Any other holder is a warning.
    """
    caches = host.caches()
    held = report.holders(caches)
    for cache in caches:
        for core in cache.cores:
            found = held.get(core.exported or '')
            if not found:
                continue
            _, volume_id = report.rbd_image_of(core.device)
            by = ', '.join(str(opener) for opener in found)
            ids = dict(volume_id=volume_id, cache_id=cache.cache_id,
                       core_id=core.core_id)
            if all(opener.instance for opener in found):
                yield Finding(OK, 'volume %s: %s (%s) is held open by %s; '
                                  'it cannot be removed until that closes '
                                  'it. If its detach failed (the guest did '
                                  'not acknowledge the unplug), its data '
                                  'stays cached here: let the guest answer '
                                  'or stop the server, then detach again.'
                              % (volume_id or core.device, core.label,
                                 core.exported, by), **ids)
            else:
                yield Finding(WARN, 'volume %s: %s (%s) is held open by %s, '
                                    'not by a server\'s QEMU: it cannot be '
                                    'detached until that process closes it '
                                    '(unmount it or end the process).'
                              % (volume_id or core.device, core.label,
                                 core.exported, by), **ids)


@register('drain')
def drain_capability(host: Host) -> Iterator[Finding]:
    """Per offered wb/wo instance: can its cores be drained here?"""
    policy = host.policy()
    running = {cache.cache_id: cache for cache in host.caches()}
    for mode, cache_id in sorted(policy.instances.items(),
                                 key=lambda item: item[1]):
        if not mode.holds_dirty_data:
            continue
        cache = running.get(cache_id)
        reason = (drain.unsupported_reason(host.casadm, cache) if cache else
                  'cache instance %d is not running.' % cache_id)
        if reason is None:
            yield Finding(OK, 'instance %d can drain (live migration of '
                              'write-back volumes allowed)' % cache_id,
                          cache_id=cache_id)
        else:
            yield Finding(WARN, 'instance %d (%s) cannot drain, so its '
                                'volumes cannot live-migrate: %s' % (
                                    cache_id, mode.value, reason),
                          cache_id=cache_id)


@register('fallback-policy')
def fallback_policy(host: Host) -> Iterator[Finding]:
    """What volumes whose mode is not served here get."""
    policy = host.conf[opts.GROUP].fallback_policy
    yield Finding(OK, 'fallback_policy=%s: volumes whose mode is not served '
                      'here %s' % (policy, {
                          opts.FALLBACK_FAIL: 'fail to attach',
                          opts.FALLBACK_UNCACHED: 'attach uncached'}.get(
                              policy, 'attach in a clean mode (wt/wa/pt)')))
