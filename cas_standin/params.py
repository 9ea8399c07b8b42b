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

"""Stand-in casadm: runtime parameters, cache start/load, device check.

``-X/--set-param`` and ``-G/--get-param`` per namespace (the table of
:mod:`os_brick_cas.opencas.casadm_params`: names, ranges and defaults of OCF
and casadm v26.03.2; the ALRU dirty-ratio options exist only from v25.12,
as in casadm), ``-S`` with a cache line size, refusing a device holding
old metadata unless ``--force`` and loading it with ``-l`` (no id, mode or
line size allowed then), and ``--script --check-cache-device``. Metadata
of a stopped cache is kept per device in ``state['cache_metadata']``.
Outputs follow casadm-samples/real-v26.03.2 (042-045, 082-084).
"""

from typing import Any, Optional

from cas_standin import faults
from cas_standin import releases
from cas_standin import state as state_mod
from os_brick_cas.opencas import casadm_params as table

Reply = state_mod.Reply
TRY_HELP = "Try `casadm --help | -H' for more information.\n"
VERBS = {'-X': 'set-param', '--set-param': 'set-param',
         '-G': 'get-param', '--get-param': 'get-param'}
_COMMON = {'-n': 'name', '--name': 'name', '-i': 'cache-id',
           '--cache-id': 'cache-id', '-j': 'core-id', '--core-id': 'core-id',
           '-o': 'output-format', '--output-format': 'output-format'}
#: short options of -X per namespace (cas_main.c set_param_namespace)
_SHORT = {'seq-cutoff': {'-t': 'threshold', '-p': 'policy'},
          'cleaning': {'-p': 'policy'}, 'promotion': {'-p': 'policy'},
          'promotion-nhit': {'-t': 'threshold', '-o': 'trigger'},
          'cleaning-alru': {'-w': 'wake-up', '-s': 'staleness-time',
                            '-b': 'flush-max-buffers',
                            '-t': 'activity-threshold',
                            '-d': 'dirty-ratio-threshold'},
          'cleaning-acp': {'-w': 'wake-up', '-b': 'flush-max-buffers'}}


def handles(argv: list[str]) -> bool:
    """Whether this module runs *argv* (the verbs it adds)."""
    return bool(argv) and (argv[0] in VERBS or
                           '--check-cache-device' in argv)


def _release(state: dict[str, Any]) -> tuple[int, int]:
    major, minor = (state.get('version') or
                    releases.DEFAULT_VERSION).split('.')[:2]
    return int(major), int(minor)


def _known(state: dict[str, Any], namespace: str) -> list[table.Param]:
    return [param for param in table.of_namespace(namespace)
            if table.supported(param, _release(state))]


def defaults() -> dict[str, dict[str, Any]]:
    """Open CAS's default value of every cache-level parameter."""
    result: dict[str, dict[str, Any]] = {}
    for param in table.PARAMS:
        if not param.per_core:
            result.setdefault(param.namespace, {})[param.option] = (
                param.default)
    return result


def _seq_cutoff_defaults() -> dict[str, Any]:
    return {p.option: p.default for p in table.of_namespace('seq-cutoff')}


def _parse(state: dict[str, Any], argv: list[str]
           ) -> tuple[str, dict[str, Any], dict[str, str]]:
    verb = VERBS[argv[0]]
    args: dict[str, Any] = {}
    values: dict[str, str] = {}
    tokens = list(argv[1:])
    while tokens:
        token = tokens.pop(0)
        if not tokens:
            raise Reply(1, TRY_HELP, 'Option %s requires a value\n' % token)
        value = tokens.pop(0)
        if token in _COMMON and not (
                verb == 'set-param' and token in _SHORT.get(
                    args.get('name', ''), {})):
            args[_COMMON[token]] = value
            continue
        namespace = args.get('name')
        if verb != 'set-param' or namespace not in _SHORT:
            raise Reply(1, TRY_HELP, 'Unrecognized option %s\n' % token)
        option = (_SHORT[namespace].get(token) if not token.startswith('--')
                  else token[2:])
        if option not in {p.option for p in _known(state, namespace)}:
            raise Reply(1, TRY_HELP, 'Unrecognized option %s\n' % token)
        values[option] = value
    if args.get('name') not in _SHORT:
        raise Reply(1, TRY_HELP, 'Invalid or missing namespace\n')
    return verb, args, values


def _convert(param: table.Param, text: str) -> Any:
    if param.choices:
        if text not in param.choices:
            raise Reply(1, '', 'Error: Invalid policy name.\n')
        return text
    if not text.isdigit() or not param.low <= int(text) <= param.high:
        raise Reply(1, '', 'Invalid value of %s: %s\n' % (param.option,
                                                          text))
    return int(text)


def _cache_params(cache: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return cache.setdefault('params', defaults())


def _core_params(core: dict[str, Any]) -> dict[str, Any]:
    return core.setdefault('seq_cutoff', _seq_cutoff_defaults())


def set_param(state: dict[str, Any], args: dict[str, Any],
              values: dict[str, str]) -> Reply:
    namespace = args['name']
    if not values:
        raise Reply(1, '', 'Error: No parameters specified!\n')
    cache = state['caches'].get(str(args.get('cache-id')))
    if cache is None:
        raise Reply(1, '', 'Cache ID does not exist\nSetting runtime '
                           'parameter failed!\n')
    known = {p.option: p for p in _known(state, namespace)}
    converted = {option: _convert(known[option], text)
                 for option, text in values.items()}
    if namespace == 'seq-cutoff':
        cores = ([cache['cores'].get(str(args['core-id']))]
                 if 'core-id' in args else list(cache['cores'].values()))
        if None in cores:
            raise Reply(1, '', 'Core id %s not available\nSetting runtime '
                               'parameter failed!\n' % args['core-id'])
        for core in cores:
            _core_params(core).update(converted)
    else:
        _cache_params(cache).setdefault(namespace, {}).update(converted)
    return Reply(0)


def get_param(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    namespace = args['name']
    if args.get('output-format') != 'csv':
        raise Reply(1, '', 'Only CSV output is simulated\n')
    cache = state['caches'].get(str(args.get('cache-id')))
    if cache is None:
        raise Reply(1, '', 'Cache id %s not running\nGetting runtime '
                           'parameter failed!\n' % args.get('cache-id'))
    if namespace == 'seq-cutoff':
        core = cache['cores'].get(str(args.get('core-id')))
        if core is None:
            raise Reply(1, '', 'Core id %s not available\nGetting runtime '
                               'parameter failed!\n' % args.get('core-id'))
        current = _core_params(core)
    else:
        current = _cache_params(cache).get(namespace, {})
    rows = ['Parameter name,Value']
    for param in _known(state, namespace):
        rows.append('%s,%s' % (param.title,
                               current.get(param.option, param.default)))
    return Reply(0, '\n'.join(rows) + '\n')


def metadata_of(state: dict[str, Any], device: str
                ) -> Optional[dict[str, Any]]:
    """The stopped cache whose metadata *device* holds, if any.

    casadm.stop_now keeps it (-T, -T -n); ``dirty`` says whether any of
    its cores still holds dirty data.
    """
    saved = state.get('metadata', {}).get(device)
    if saved is None:
        return None
    return dict(saved['cache'], cache_id=saved['id'], dirty=any(
        c.get('dirty') for c in saved['cache']['cores'].values()))


def check_cache_device(state: dict[str, Any], argv: list[str]) -> Reply:
    """``--script --check-cache-device --cache-device DEV``."""
    device = argv[argv.index('--cache-device') + 1] if (
        '--cache-device' in argv[:-1]) else None
    if not device:
        raise Reply(1, TRY_HELP, "Option '--cache-device (-d)' is missing\n")
    old = metadata_of(state, device)
    row = ('no,-,-' if old is None else
           'yes,yes,%s' % ('yes' if old.get('dirty') else 'no'))
    return Reply(0, 'Is cache,Clean Shutdown,Cache dirty\n%s\n' % row)


def run(state_dir: str, argv: list[str]) -> tuple[str, Reply]:
    """Run one of this module's verbs under the state lock.

    An injected fault of the verb (Host.inject_fault) plays after the lock
    is released, as in the other casadm verbs.
    """
    verb = ('check-cache-device' if '--check-cache-device' in argv
            else VERBS[argv[0]])
    try:
        with state_mod.locked(state_dir) as state:
            if not state['module_loaded']:
                return verb, Reply(1, 'Is the kernel module loaded?\n',
                                   'Device /dev/cas_ctrl not found\n')
            fault = faults.take(state, verb)
            if fault is None:
                if verb == 'check-cache-device':
                    return verb, check_cache_device(state, argv)
                verb, args, values = _parse(state, argv)
                if verb == 'set-param':
                    return verb, set_param(state, args, values)
                return verb, get_param(state, args)
        return verb, Reply(faults.play(fault))
    except Reply as reply:
        return verb, reply
