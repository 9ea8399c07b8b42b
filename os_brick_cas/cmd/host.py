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

"""``os-brick-cas host plan|apply|check``: the host's cache instances.

``plan`` prints what ``apply`` would do and what the layout costs in RAM;
``apply`` starts or reconfigures instances (never with ``--force``) and
writes their opencas.conf rows, and changes nothing the second time;
``check`` reports every way the live host differs from the layout.
Exit codes: 0 nothing to report, 1 drift or warnings, 2 refused/failed.
"""

import argparse
import os
import sys
from typing import Any, Optional

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import output
from os_brick_cas import exception
from os_brick_cas.host import boot
from os_brick_cas.host import flush_rates
from os_brick_cas.host import layout_file
from os_brick_cas.host import prep
from os_brick_cas.host import sizing
from os_brick_cas import io_class_table
from os_brick_cas.opencas import known_defects
from os_brick_cas import opts

CONF = cfg.CONF
SOURCE = ('Open CAS system requirements as reported in the os-brick-cas '
          'admin guide, "Sizing"')


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        'host', help='plan, apply or check the cache instances of this host '
                     'against the host layout ([os_brick_cas] host_layout)')
    verbs = parser.add_subparsers(dest='host_command', required=True)
    for verb, func, text in (
            ('plan', run_plan, 'print what apply would do and the RAM the '
                               'layout needs'),
            ('apply', run_apply, 'start or reconfigure instances and write '
                                 'opencas.conf')):
        sub = verbs.add_parser(verb, help=text)
        sub.add_argument('--load-existing', action='store_true',
                         help='load an instance whose metadata a device '
                              'holds (casadm -S -d DEV -l) instead of '
                              'refusing')
        sub.set_defaults(func=func)
    check = verbs.add_parser('check', help='report how the host differs '
                                           'from the layout')
    check.add_argument('--measure-flush', action='store_true',
                       help='flush each wb/wo instance once (nothing is '
                            'dropped) and record its flush rate')
    check.set_defaults(func=run_check)


def _load() -> layout_file.HostLayout:
    return layout_file.load(CONF[opts.GROUP].host_layout)


def _ram_lines(state: prep.HostState, raw: bool = False) -> list[str]:
    """The Memory section: no heading without a figure under it."""
    lines = []
    unknown = []
    for item in state.instances:
        layout = item.layout
        if item.size_bytes is None:
            unknown.append('%d (%s)' % (layout.cache_id, layout.device))
            continue
        lines.append('  instance %d (%s, %d KiB lines): %s cache, %s of '
                     'metadata in RAM and on the device (%.3f %%)' % (
                         layout.cache_id, layout.mode.value,
                         layout.line_size_kib,
                         output.size(item.size_bytes, raw),
                         output.size(item.metadata_bytes, raw),
                         100 * sizing.metadata_fraction(
                             layout.line_size_kib)))
    if unknown:
        note = ('size of instance %s unknown (no such device under %s and '
                'no size_gib in the layout): RAM not estimated for %s' % (
                    ', '.join(unknown), CONF[opts.GROUP].host_root,
                    'them' if len(unknown) > 1 else 'it'))
        if not lines:
            return ['Memory: not estimated: %s' % note]
        lines.append('  %s' % note)
    total = sizing.host_ram_bytes([prep.ram_needed(state)])
    lines.append('  Open CAS needs about %s of RAM: 1 GiB + the metadata '
                 'above (%s; estimates, a running instance shows its own '
                 '"Metadata Memory Footprint" in casadm -P)' % (
                     output.size(total, raw), SOURCE))
    try:
        memory = sizing.meminfo(CONF[opts.GROUP].host_root)
    except OSError as exc:
        lines.append('  host memory unknown: %s' % exc)
    else:
        lines.append('  host: MemTotal %s, MemAvailable %s%s' % (
            output.size(memory.get('MemTotal', 0), raw),
            output.size(memory.get('MemAvailable', 0), raw),
            '' if total <= memory.get('MemTotal', 0) else
            ' - THE LAYOUT NEEDS MORE RAM THAN THE HOST HAS'))
    lines.append('  nova.conf [DEFAULT] reserved_host_memory_mb = %d '
                 "(nova's default %d + Open CAS's %d MiB)" % (
                     sizing.reserved_host_memory_mb(total),
                     sizing.NOVA_RESERVED_DEFAULT_MB,
                     sizing.reserved_host_memory_mb(total, 0)))
    return ['Memory:'] + lines


#: shares whose cache space ``host plan`` prints per instance
SHARE_EXAMPLES = (1, 10, 25)


def _share_plan(casadm: casadm_mod.Casadm, item: prep.InstanceState
                ) -> Optional[dict[str, Any]]:
    """How many shared volumes the instance holds, what a share buys.

    Ids and percent in use come from the running instance's IO-class
    table (none when it is not running); None without a size.
    """
    if item.size_bytes is None:
        return None
    drains, shares = 0, []
    if item.running is not None:
        try:
            table = casadm.list_io_classes(item.layout.cache_id)
        except exception.CasError:
            table = []
        for entry in io_class_table.entries(table):
            if entry.drained:
                drains += 1
            elif entry.share is not None:
                shares.append(entry.share)
    ids_left, percent_left = sizing.share_room(drains, shares)
    usable = item.size_bytes - (item.metadata_bytes or 0)
    return {'drains': drains, 'shares': len(shares),
            'share_percent': sum(shares), 'ids_left': ids_left,
            'percent_left': percent_left,
            'bytes_per_share': {str(percent): sizing.share_bytes(
                usable, item.layout.line_size_kib, percent)
                for percent in SHARE_EXAMPLES}}


def _share_lines(plans: list[tuple[int, Optional[dict[str, Any]]]],
                 raw: bool = False) -> list[str]:
    """The "Cache shares" section of host plan."""
    lines = []
    for cache_id, plan in plans:
        if plan is None:
            continue
        lines.append(
            '  instance %d: room for %d more shared volume(s) (%d IO class '
            'ids of 32 left: %d drained, %d shared) within %d%% (shares '
            'now sum to %d%%); a share of %s' % (
                cache_id, min(plan['ids_left'], plan['percent_left']),
                plan['ids_left'], plan['drains'], plan['shares'],
                plan['percent_left'], plan['share_percent'], ', '.join(
                    '%s%% caps a volume at %s' % (
                        percent, output.size(size, raw))
                    for percent, size in plan['bytes_per_share'].items())))
    if not lines:
        return []
    return ['Cache shares (cas:cache_share; a cap, not a reservation):'] + \
        lines


def _defect_warnings(state: prep.HostState) -> list[str]:
    """Crash defects of the release; instances whose mode it can lose.

    The loaded module's release decides, with the fixes its build manifest
    lists (known_defects.loaded_module); before it is loaded, casadm's
    release, with no fix counted (which build will load is not known yet).
    """
    version = known_defects.loaded_version(CONF) or state.cli_version
    warnings = ['WARN Open CAS %s has known defect %s: %s (%s)' % (
        version, defect.key, defect.advice, defect.summary)
        for defect in known_defects.crash_defects(version, CONF)]
    for item in state.instances:
        mode = item.layout.mode
        for defect in known_defects.unaccepted(mode, version, CONF):
            warnings.append(
                'WARN instance %d (%s): Open CAS %s has known defect %s, '
                'which can lose acknowledged %s writes; new %s attaches '
                'will be refused (doctor fails the mode) until you load a '
                "module built with the os_brick_cas role's patch series, "
                'install a release without it (v25.12.2 or v24.9) or accept '
                'it in [os_brick_cas] accepted_data_loss_defects = %s' % (
                    item.layout.cache_id, mode.value, version, defect.key,
                    mode.value, mode.value, defect.key))
    return warnings


def _header(state: prep.HostState) -> str:
    return 'Host layout %s; casadm %s' % (state.layout.path,
                                          state.cli_version or 'unknown')


#: ``host plan`` rows (``-f value``/``csv``/``-c``): one per instance
PLAN_COLUMNS = ('cache_id', 'mode', 'device', 'running', 'size_bytes',
                'metadata_bytes', 'actions', 'refusal', 'share_ids_left',
                'share_percent_left')


def _survey_or_layout(casadm: casadm_mod.Casadm,
                      layout: layout_file.HostLayout, load_existing: bool
                      ) -> tuple[prep.HostState, Optional[str]]:
    """(state, why casadm was not asked): the layout alone without it."""
    try:
        return prep.survey(casadm, layout,
                           load_existing=load_existing), None
    except (exception.CasadmNotFound, exception.CasModuleNotLoaded) as exc:
        return prep.layout_only(layout), str(exc)


def run_plan(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    try:
        layout = _load()
        state, not_asked = _survey_or_layout(casadm, layout,
                                             args.load_existing)
    except exception.CasError as exc:
        print('os-brick-cas host plan: %s' % exc, file=sys.stderr)
        return 2
    raw = getattr(args, 'raw', False)
    lines = [_header(state)]
    if not_asked:
        lines.append('Open CAS is not usable here (%s): sized from the '
                     'layout alone; run plan again once it is installed to '
                     'see what apply would do' % not_asked)
    for item in state.instances:
        lines.append('instance %d (%s) on %s: %s' % (
            item.layout.cache_id, item.layout.mode.value, item.layout.device,
            'running' if item.running else 'not running'))
        lines += ['  would %s' % action.summary for action in item.actions]
        if item.refusal:
            lines.append('  REFUSED: %s' % item.refusal)
        elif not item.actions and not not_asked:
            lines.append('  matches the layout')
    for cache in state.unlisted:
        lines.append('instance %d (%s) on %s runs but is not in the layout: '
                     'left alone' % (cache.cache_id, cache.mode,
                                     cache.device))
    changes = prep.conf_would_change(layout,
                                     CONF[opts.GROUP].opencas_conf)
    lines.append('%s: %s' % (CONF[opts.GROUP].opencas_conf, {
        True: 'would write the [caches] rows of the layout',
        False: 'its [caches] rows match the layout',
        None: 'cannot be read'}[changes]))
    lines += _ram_lines(state, raw)
    share_plans = [(item.layout.cache_id, _share_plan(casadm, item))
                   for item in state.instances]
    lines += _share_lines(share_plans, raw)
    predictions = flush_rates.predict(casadm, state)
    known = [p for p in predictions if p.cache_bytes is not None]
    if known:
        lines.append('Drain time (wb/wo):')
        lines += ['  %s' % prediction for prediction in known]
    warnings = _defect_warnings(state)
    lines += warnings
    document = {
        'layout': layout.path, 'casadm': state.cli_version or None,
        'open_cas_not_usable': not_asked,
        'instances': [{
            'cache_id': item.layout.cache_id,
            'mode': item.layout.mode.value, 'device': item.layout.device,
            'running': item.running is not None,
            'size_bytes': item.size_bytes,
            'metadata_bytes': item.metadata_bytes,
            'actions': [action.summary for action in item.actions],
            'refusal': item.refusal,
            'shares': plan,
            'share_ids_left': plan and plan['ids_left'],
            'share_percent_left': plan and plan['percent_left']}
            for item, (_cache_id, plan) in zip(state.instances,
                                               share_plans)],
        'unlisted': [{'cache_id': cache.cache_id, 'mode': cache.mode,
                      'device': cache.device} for cache in state.unlisted],
        'opencas_conf_would_change': changes,
        'ram_bytes': sizing.host_ram_bytes([prep.ram_needed(state)]),
        'drain': [str(prediction) for prediction in predictions],
        'warnings': warnings}
    output.emitter(args)(
        document, PLAN_COLUMNS,
        lambda: [tuple('; '.join(value) if isinstance(value, list) else
                       value for value in (
                           row[key] for key in PLAN_COLUMNS))
                 for row in document['instances']],
        lambda: '\n'.join(lines) + '\n')
    return 2 if state.refusals else 0


def _refuse(state: prep.HostState) -> int:
    for refusal in state.refusals:
        print('REFUSED %s' % refusal, file=sys.stderr)
    print('Nothing was changed.', file=sys.stderr)
    return 2


def _ram_refusal(state: prep.HostState) -> str:
    """Why the new instances do not fit in this host's memory, or ''."""
    new = prep.ram_needed(state, only_new=True)
    if not new:
        return ''
    try:
        available = sizing.meminfo(
            CONF[opts.GROUP].host_root).get('MemAvailable')
    except OSError:
        return ''
    if available is None or new <= available:
        return ''
    return ('the instances to start need about %s of RAM for their '
            'metadata and the host has %s available (Open CAS then fails '
            'with "Not enough free RAM"); use a larger cache line size or '
            'smaller devices (see "os-brick-cas host plan")' % (
                sizing.human(new), sizing.human(available)))


def run_apply(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    done: list[prep.Action] = []
    try:
        layout = _load()
        state = prep.survey(casadm, layout,
                            load_existing=args.load_existing)
        if state.refusals:
            return _refuse(state)
        too_big = _ram_refusal(state)
        if too_big:
            print('REFUSED: %s. Nothing was changed.' % too_big,
                  file=sys.stderr)
            return 2
        loads = [a for a in state.actions if a.kind == 'load']
        for action in loads:
            action.run(casadm)
            done.append(action)
        if loads:
            state = prep.survey(casadm, layout)
            if state.refusals:
                _print_changed(done)
                return _refuse(state)
        for action in state.actions:
            action.run(casadm)
            done.append(action)
        conf_changed = prep.write_conf(layout)
    except exception.CasError as exc:
        _print_changed(done)
        print('os-brick-cas host apply: %s' % exc, file=sys.stderr)
        print('Stopped there.' if done else 'Nothing was changed.',
              file=sys.stderr)
        return 2
    changed = ['%s' % action for action in done]
    if conf_changed:
        changed.append('%s: wrote the [caches] rows of instance(s) %s' % (
            CONF[opts.GROUP].opencas_conf,
            ', '.join(str(i.cache_id) for i in layout.instances)))
    warnings = _defect_warnings(state)
    code, result = 0, 'the host matches %s now' % layout.path
    if not changed:
        result = 'nothing to change: the host matches %s' % layout.path
    else:
        left = prep.survey(casadm, layout)
        if left.actions or left.refusals:
            warnings += ['WARN still differs after apply: %s' % item
                         for item in left.actions]
            code, result = 1, 'the host still differs from %s' % layout.path
    document = {'layout': layout.path, 'changed': changed,
                'warnings': warnings, 'result': result, 'exit_code': code}
    output.emitter(args)(
        document, ('change',), lambda: [(line,) for line in changed],
        lambda: ''.join('%s\n' % line for line in
                        ['changed %s' % line for line in changed] +
                        warnings + ([result] if code == 0 else [])))
    return code


def _print_changed(done: list[prep.Action]) -> None:
    """What a stopped apply had changed (stdout, before its error)."""
    for action in done:
        print('changed %s' % action)


def check_findings(casadm: casadm_mod.Casadm,
                   layout: layout_file.HostLayout
                   ) -> list[tuple[str, str]]:
    """(level, message) for every difference between host and layout."""
    state = prep.survey(casadm, layout)
    findings = [('FAIL', refusal) for refusal in state.refusals]
    for item in state.instances:
        cache_id = item.layout.cache_id
        if item.running is None and not item.refusal:
            findings.append(('WARN', 'instance %d (%s) is not running: run '
                                     '"os-brick-cas host apply"' % (
                                         cache_id, item.layout.mode.value)))
        for drift in item.drifts:
            findings.append(('WARN', '%s (changed by hand? "os-brick-cas '
                                     'host apply" sets it back)' % drift))
        if item.running is not None and not item.drifts and (
                not item.refusal):
            findings.append(('OK', 'instance %d (%s) matches the host layout'
                             % (cache_id, item.layout.mode.value)))
    for cache in state.unlisted:
        findings.append(('WARN', 'instance %d (%s) runs but is not in the '
                                 'host layout %s' % (cache.cache_id,
                                                     cache.mode, layout.path)))
    if prep.conf_would_change(layout, CONF[opts.GROUP].opencas_conf):
        findings.append(('WARN', "%s's [caches] rows differ from the layout "
                                 '(a reboot would start other instances): '
                                 'run "os-brick-cas host apply"' %
                                 CONF[opts.GROUP].opencas_conf))
    findings += flush_rates.budget_findings(
        flush_rates.predict(casadm, state),
        nova_budgets())
    return findings


def nova_budgets(conf: cfg.ConfigOpts = CONF) -> dict[str, int]:
    """nova's drain budgets, if nova_ext's options are available."""
    try:
        from nova_ext import opts as nova_opts
    except ImportError:
        return {}
    group = conf[nova_opts.GROUP]
    return {name: getattr(group, name)
            for name in flush_rates.NOVA_BUDGETS}


def run_check(args: argparse.Namespace) -> int:
    casadm = casadm_mod.Casadm()
    raw = getattr(args, 'raw', False)
    findings: list[tuple[str, str]] = []
    try:
        layout = _load()
        if args.measure_flush:
            for instance in layout.instances:
                if not instance.mode.holds_dirty_data:
                    continue
                try:
                    figure = flush_rates.measure_flush(
                        casadm, instance.cache_id)
                except exception.CasError as exc:
                    findings.append(('WARN', 'instance %d: flush not '
                                             'measured: %s' % (
                                                 instance.cache_id, exc)))
                    continue
                findings.append(('OK', 'instance %d flushed %s in %.1f s: '
                                       '%.1f MiB/s (recorded)' % (
                                           instance.cache_id,
                                           output.size(figure['dirty_bytes'],
                                                       raw),
                                           figure['seconds'],
                                           figure['rate_mib_s'])))
        findings += check_findings(casadm, layout)
    except exception.CasError as exc:
        findings.append(('FAIL', str(exc)))
    levels = {level for level, _ in findings}
    code = 2 if 'FAIL' in levels else 1 if 'WARN' in levels else 0
    document = {'findings': [{'level': level, 'message': message}
                             for level, message in findings],
                'exit_code': code}
    output.emitter(args)(
        document, ('level', 'message'), lambda: findings,
        lambda: ''.join('%-4s %s\n' % finding for finding in findings))
    return code


def doctor_findings(casadm: casadm_mod.Casadm,
                    conf: cfg.ConfigOpts = CONF) -> list[tuple[str, str]]:
    """doctor's host checks: boot order, then the host layout if any."""
    findings = boot.findings(conf)
    path = conf[opts.GROUP].host_layout
    if not os.path.exists(path):
        return findings + [('SKIP', 'no host layout at %s: instances '
                                    'not compared with one (see '
                                    '"os-brick-cas host plan")' % path)]
    try:
        return findings + check_findings(casadm, layout_file.load(path))
    except exception.CasError as exc:
        return findings + [('FAIL', 'host layout: %s' % exc)]
