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

"""Stand-in ``casadm``: Open CAS's CLI over a simulated host.

Output formats, messages and exit codes follow casadm 26.03.2 as recorded
on a real kernel (tests/data/real-casadm/v26.03.2, replayed by
tests/functional/test_casadm_realism.py); what differs in v24.9, v25.12 and
master is in :mod:`.releases` (doc/source/contributor/simulator.rst has the
sources of each string).
"""

import functools
import json
import os
import signal
import sys
import time
from typing import Any, Optional

from cas_standin import datatrue
from cas_standin import devices
from cas_standin import faults
from cas_standin import ioclass
from cas_standin import params as sim_params
from cas_standin import releases
from cas_standin import state as state_mod
from cas_standin import stats as stats_mod
from cas_standin import udev
from os_brick_cas.opencas import stand_in

VERSION = releases.DEFAULT_VERSION
LIST_HEADER = 'type,id,disk,status,write policy,device'
WHITELIST_PREFIXES = ('/dev/cas', '/dev/ram', '/dev/nullb', '/dev/drbd')

#: casadm's hint after an options error (argp.c, print_info; stdout)
TRY_HELP = "Try `casadm --help | -H' for more information.\n"
#: an interrupted flush (cas_lib.c, DIRTY_FLUSHING_WARNING; stderr)
DIRTY_FLUSHING_WARNING = (
    'You have interrupted flushing of cache dirty data. CAS continues to '
    'operate\nnormally and dirty data that remains on cache device will be '
    'flushed by cleaning thread.\n')
#: OCF_ERR_CACHE_IN_INCOMPLETE_STATE (extended_err_msg.c)
INCOMPLETE = 'Cache is in incomplete state - at least one core is inactive\n'
#: the first release whose ``-F`` takes ``-j`` (before: ``-E``)
PER_CORE_F_SINCE = (24, 9)
#: an I/O to a core whose device is gone (a force-unmapped krbd device)
IO_ERROR = 'I/O error'
#: cas_lib.c: a core whose by-id link does not resolve (stderr)
UNRESOLVED = ('WARNING: Can not resolve path to core %s from cache %s. '
              'By-id path will be shown for that core.\n')
INCOMPLETE_WARNING = 'WARNING: ' + INCOMPLETE
#: cas_main.c, start-cache option check
LOAD_FORBIDDEN = ("Use of 'load' with 'force', 'cache-id', 'cache-mode' or "
                  "'cache-line-size' simultaneously is forbidden.\n")
#: OCF_ERR_CORE_IN_DIRTY_STATE... of --remove-inactive (extended_err_msg.c)
INACTIVE_DIRTY = ('The cache contains dirty data assigned to the core. If '
                  'you want to continue, please use --force option.\n'
                  'Warning: the data will be lost\n')

VERBS = {'-L': 'list-caches', '--list-caches': 'list-caches',
         '-A': 'add-core', '--add-core': 'add-core',
         '-R': 'remove-core', '--remove-core': 'remove-core',
         '--remove-inactive': 'remove-inactive',
         '-F': 'flush-cache', '--flush-cache': 'flush-cache',
         '-E': 'flush-core-old', '--flush-core': 'flush-core-old',
         '-P': 'stats', '--stats': 'stats',
         '-V': 'version', '--version': 'version',
         '-S': 'start-cache', '--start-cache': 'start-cache',
         '-T': 'stop-cache', '--stop-cache': 'stop-cache',
         '-Q': 'set-cache-mode', '--set-cache-mode': 'set-cache-mode',
         '-C': 'io-class', '--io-class': 'io-class',
         '-X': 'set-param', '--set-param': 'set-param',
         '-G': 'get-param', '--get-param': 'get-param',
         '--remove-detached': 'remove-detached'}
#: sub-commands of --io-class (cas_main.c, io_class_params_options)
IO_CLASS_SUBCMDS = {'-C': 'load-config', '--load-config': 'load-config',
                    '-L': 'list', '--list': 'list'}
VALUE_OPTS = {'-i': 'cache-id', '--cache-id': 'cache-id',
              '-j': 'core-id', '--core-id': 'core-id',
              '-d': 'device', '--core-device': 'device',
              '--cache-device': 'device',
              '-o': 'output-format', '--output-format': 'output-format',
              '-c': 'cache-mode', '--cache-mode': 'cache-mode',
              '-x': 'cache-line-size', '--cache-line-size': 'cache-line-size',
              '--filter': 'filter', '--file': 'file',
              '-p': 'policy', '--policy': 'policy',
              '--device': 'device'}
FLAG_OPTS = {'-b': 'by-id-path', '--by-id-path': 'by-id-path',
             '--force': 'force', '-n': 'no-data-flush',
             '--no-data-flush': 'no-data-flush', '-l': 'load',
             '--load': 'load', '--script': 'script', '--try-add': 'try-add'}

#: the reply type every command ends with
Reply = state_mod.Reply


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    verb = None
    args: dict[str, Any] = {}
    tokens = list(argv)
    while tokens:
        token = tokens.pop(0)
        if token in VERBS and verb is None:
            verb = VERBS[token]
        elif (verb == 'io-class' and token in IO_CLASS_SUBCMDS and
              'subcmd' not in args):
            args['subcmd'] = IO_CLASS_SUBCMDS[token]
        elif (token in ('-n', '--name') and
              verb in ('set-param', 'get-param')):
            if not tokens:
                raise Reply(1, '', 'Option %s requires a value\n' % token)
            args['name'] = tokens.pop(0)
        elif token in ('-d', '--io-class-id') and verb == 'stats':
            # an optional value (cas_main.c: CLI_OPTION_OPTIONAL_ARG)
            args['io-class-id'] = (tokens.pop(0) if tokens and
                                   not tokens[0].startswith('-') else '')
        elif token == '-f' and verb == 'io-class':
            if not tokens:
                raise Reply(1, '', 'Option -f requires a value\n')
            args['file'] = tokens.pop(0)
        elif token == '-f':
            # -f: --force for -R/-S/--remove-inactive, --filter for -P,
            # --flush-cache yes|no for -Q
            if verb == 'stats':
                args['filter'] = tokens.pop(0)
            elif verb == 'set-cache-mode':
                args['flush'] = tokens.pop(0)
            else:
                args['force'] = True
        elif token in VALUE_OPTS:
            if not tokens:
                raise Reply(1, '', 'Option %s requires a value\n' % token)
            args[VALUE_OPTS[token]] = tokens.pop(0)
        elif token in FLAG_OPTS:
            args[FLAG_OPTS[token]] = True
        else:
            raise Reply(1, '', 'Unrecognized command %s\n' % token)
    if verb is None:
        raise Reply(1, '', 'No command given\n')
    if verb == 'add-core' and args.get('try-add'):
        verb = 'try-add'
    if verb == 'flush-cache' and 'core-id' in args:
        verb = 'flush-core'
    return verb, args


def _int(args: dict[str, Any], name: str) -> int:
    try:
        return int(args[name])
    except KeyError:
        raise Reply(1, '', 'Missing required option --%s\n' % name)
    except ValueError:
        raise Reply(1, '', 'Invalid value of --%s: %s\n' % (name, args[name]))


def _cache(state: dict[str, Any], cache_id: int, operation: str
           ) -> dict[str, Any]:
    cache = state['caches'].get(str(cache_id))
    if cache is None:
        raise Reply(1, '', _lines(operation, 'Cache ID does not exist'))
    return cache


def _lines(*lines: str) -> str:
    return ''.join(line + '\n' for line in lines if line)


def _core(cache: dict[str, Any], core_id: int, operation: str
          ) -> dict[str, Any]:
    core = cache['cores'].get(str(core_id))
    if core is None:
        raise Reply(1, '', _lines(operation, 'Core ID does not exist'))
    return core


def _exported(cache_id: int, core_id: int) -> str:
    return '/dev/cas%d-%d' % (cache_id, core_id)


def _check_device(state: dict[str, Any], path: str) -> str:
    """Apply casadm's device-path rules; return the resolved device.

    Options handling comes first (cas_main.c validate_device_name ->
    cas_lib.c validate_dev, plain printf to stdout, then argp.c's
    "Error during options handling"); the by-id rule (set_device_path)
    only sees an existing block device.
    """
    resolved = os.path.realpath(path)
    if not os.path.exists(path):
        raise Reply(1, 'Failed to query device status.\n' + TRY_HELP,
                    'Error during options handling\n')
    if resolved not in state['devices']:
        raise Reply(1, 'Path does not describe a block device\n' + TRY_HELP,
                    'Error during options handling\n')
    _by_id_rule(path)
    return resolved


def _by_id_rule(path: str) -> None:
    """cas_lib.c set_device_path: a by-id link or a whitelisted name."""
    if not (os.path.realpath(os.path.dirname(path)) == devices.BY_ID or
            path.startswith(WHITELIST_PREFIXES)):
        raise Reply(1, '', 'Please use correct by-id path to the device '
                           '%s.\n' % path)


def _unresolved(state: dict[str, Any], core: dict[str, Any]) -> bool:
    """Whether a core's by-id link no longer leads to a present device."""
    return os.path.realpath(core['device']) not in state['devices']


def _update_cache_status(cache: dict[str, Any]) -> None:
    if cache['status'] in ('Running', 'Incomplete'):
        inactive = any(c['status'] == 'Inactive'
                       for c in cache['cores'].values())
        cache['status'] = 'Incomplete' if inactive else 'Running'


def _activate(state: dict[str, Any], cache_id: int, core_id: int,
              core: dict[str, Any], resolved: str, args: dict[str, Any],
              operation: str) -> None:
    core.update(status='Active', resolved=resolved)
    if not datatrue.enabled(state):
        devices.symlink(state, _exported(cache_id, core_id), resolved)
        return
    try:
        datatrue.export(args['_state_dir'], state, cache_id, core_id, core,
                        _exported(cache_id, core_id))
    except datatrue.StandInError as exc:
        core['status'] = 'Inactive'
        raise Reply(1, '', '%s\n%s\n' % (operation, exc))


def add_core(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    cache_id = _int(args, 'cache-id')
    operation = 'Error while adding core device to cache instance %d' % (
        cache_id)
    path = args.get('device')
    if not path:
        raise Reply(1, '', 'Missing required option --core-device\n')
    resolved = _check_device(state, path)
    cache = _cache(state, cache_id, operation)
    if any(c['device'] == path for c in cache['cores'].values()):
        raise Reply(1, '', '%s\nDevice already added as a core\n'
                    % operation)
    for other_id, other in state['caches'].items():
        for core in other['cores'].values():
            same_device = (core.get('resolved') == resolved and
                           core['status'] != 'Inactive')
            same_link_elsewhere = (core['device'] == path and
                                   other_id != str(cache_id))
            if same_device or same_link_elsewhere:
                raise Reply(1, '', "%s\nCore device '%s' is already cached."
                            "\n" % (operation, path))
    if (path in state['open'] or resolved in state['open'] or
            path in state.get('core_pool', [])):
        # a device parked in the core pool is held open by Open CAS
        raise Reply(1, '', "%s\nFailed to open '%s' device exclusively. "
                           "Please close all applications accessing it or "
                           "unmount the device.\n" % (operation, path))
    if 'core-id' in args:
        core_id = _int(args, 'core-id')
        if str(core_id) in cache['cores']:
            raise Reply(1, '', '%s\nCore id already used\n' % operation)
    else:
        core_id = state.get('device_offset', 0) + 1
        while str(core_id) in cache['cores']:
            core_id += 1
    core = {'device': path, 'resolved': resolved, 'status': 'Active',
            'dirty': 0, 'clean': 0,
            'size_blocks': state['devices'][resolved] // 4096,
            'read_hits': 0, 'read_total': 0, 'write_hits': 0,
            'write_total': 0}
    cache['cores'][str(core_id)] = core
    try:
        _activate(state, cache_id, core_id, core, resolved, args, operation)
    except Reply:
        del cache['cores'][str(core_id)]
        raise
    return Reply(0, 'Successfully added core %d to cache instance %d\n'
                 % (core_id, cache_id))


def try_add(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    cache_id = _int(args, 'cache-id')
    core_id = _int(args, 'core-id')
    operation = 'Error while adding core device to cache instance %d' % (
        cache_id)
    path = args.get('device', '')
    resolved = _check_device(state, path)
    if str(cache_id) not in state['caches']:
        # no such cache: Open CAS parks the device in its core pool, where
        # it stays (held open) until --remove-detached or that cache loads
        pool = state.setdefault('core_pool', [])
        if path not in pool:
            pool.append(path)
        return Reply(0, 'Successfully added device in try add mode %s\n'
                     % path)
    cache = _cache(state, cache_id, operation)
    core = _core(cache, core_id, operation)
    if core['status'] != 'Inactive':
        # ocf_mngt_core.c, ocf_mngt_cache_try_add_core_prepare: an opened
        # core -> OCF_ERR_CORE_UUID_EXISTS (e.g. the udev loader was first)
        raise Reply(1, '', '%s\nDevice already added as a core\n'
                    % operation)
    if core['device'] != path:
        raise Reply(1, '', '%s\nCore device not available\n' % operation)
    _activate(state, cache_id, core_id, core, resolved, args, operation)
    _update_cache_status(cache)
    return Reply(0, 'Successfully added device in try add mode %s\n' % path)


def activate_inactive(state: dict[str, Any], cache_id: int, core_id: int,
                      resolved: str, state_dir: Optional[str] = None) -> None:
    """What a successful try-add does: the udev loader's try-add."""
    cache = state['caches'][str(cache_id)]
    _activate(state, cache_id, core_id, cache['cores'][str(core_id)],
              resolved, {'_state_dir': state_dir},
              'Error while adding core device to cache instance %d'
              % cache_id)
    _update_cache_status(cache)


def _flush_core(state_dir: str, cache_id: int, core_id: int,
                operation: Optional[str]) -> None:
    """Write a core's dirty data back, taking time per dirty block.

    Errors name the *operation* first (-R does); flush verbs pass None:
    they print only the cause (cas_lib.c flush_core/flush_cache).
    """
    first = operation + '\n' if operation else ''
    with state_mod.locked(state_dir) as state:
        core = _core(_cache(state, cache_id, first.strip()), core_id,
                     first.strip())
        if core['status'] == 'Inactive':
            raise Reply(1, '', '%sCore device is in inactive state\n'
                        % first)
        if core['dirty'] and core.get('resolved') not in state['devices']:
            # its krbd device was force-unmapped: writes back fail
            raise Reply(1, '', '%s%s\n' % (first, IO_ERROR))
        data_true = datatrue.enabled(state)
        delay = core['dirty'] * state['flush_ms_per_block'] / 1000.0
        steps = state.get('flush_steps', 1) if delay else 1
    if data_true:
        # outside the state lock, as a real flush does not stop -L or -P
        try:
            cleaned = datatrue.flush(state_dir, cache_id, core_id)
        except datatrue.StandInError:
            # casadm prints only the cause of a failed flush
            raise Reply(1, '', 'Error while writing to core device\n')
        with state_mod.locked(state_dir) as state:
            state['flushed_blocks'] = state.get('flushed_blocks', 0) + \
                cleaned
        return
    if delay:
        signal.signal(signal.SIGINT, _interrupt_flush)
        signal.signal(signal.SIGTERM, _interrupt_flush)
    # with flush_steps > 1 in steps, as Open CAS does: -P sees the dirty
    # count fall meanwhile, and an interrupted flush has written a part
    for step in range(steps, 0, -1):
        time.sleep(delay / steps)
        with state_mod.locked(state_dir) as state:
            core = state['caches'][str(cache_id)]['cores'].get(str(core_id))
            if core is None:
                return
            cleaned = -(-core['dirty'] // step)     # the rest in the last
            core['clean'] += cleaned
            state['flushed_blocks'] = state.get('flushed_blocks', 0) + \
                cleaned
            core['dirty'] -= cleaned
            if not core['dirty']:
                core.pop('dirty_since', None)


def _interrupt_flush(signum, frame):
    raise Reply(2, '', 'Flushing of core interrupted\n')


def flush(state_dir: str, verb: str, args: dict[str, Any],
          operation: Optional[str] = None) -> Reply:
    """-F [-j]: errors print only their cause (cas_lib.c flush_cache).

    A whole-cache flush of an Incomplete cache is refused (OCF's
    src/mngt/ocf_mngt_flush.c, ocf_mngt_cache_flush); a per-core flush is
    not (ocf_mngt_core_flush refuses only a core that is itself inactive).
    """
    cache_id = _int(args, 'cache-id')
    if verb == 'flush-core':
        core_ids = [_int(args, 'core-id')]
    else:
        with state_mod.locked(state_dir) as state:
            cache = _cache(state, cache_id, operation or '')
            if cache['status'] == 'Incomplete':
                raise Reply(1, '', '%s%s' % (
                    operation + '\n' if operation else '', INCOMPLETE))
            core_ids = [int(i) for i, c in cache['cores'].items()
                        if c['status'] != 'Inactive']
            cache['flushed_before'] = state.get('flushed_blocks', 0)
    try:
        for done, core_id in enumerate(core_ids, 1):
            try:
                _flush_core(state_dir, cache_id, core_id, operation)
            except Reply as reply:
                if reply.code == 2:
                    raise Reply(2, '', DIRTY_FLUSHING_WARNING)
                raise
            if verb != 'flush-core' and done < len(core_ids):
                _show_flush_progress(state_dir, cache_id)
    finally:
        if verb != 'flush-core':
            with state_mod.locked(state_dir) as state:
                state['caches'][str(cache_id)].pop('flushing', None)
    return Reply(0)


def _show_flush_progress(state_dir: str, cache_id: int) -> None:
    # casadm -L shows 'Flushing' once a block of this flush is written
    with state_mod.locked(state_dir) as state:
        cache = state['caches'][str(cache_id)]
        dirty = sum(core['dirty'] for core in cache['cores'].values())
        flushed = state.get('flushed_blocks', 0) - cache.get(
            'flushed_before', 0)
        if flushed:
            cache['flushing'] = 100.0 * flushed / (flushed + dirty)


def remove_core(state_dir: str, args: dict[str, Any]) -> Reply:
    cache_id = _int(args, 'cache-id')
    core_id = _int(args, 'core-id')
    operation = ('Error while removing core device %d from cache instance '
                 '%d' % (core_id, cache_id))
    with state_mod.locked(state_dir) as state:
        core = _core(_cache(state, cache_id, operation), core_id, operation)
        if core['status'] == 'Inactive':
            raise Reply(1, '', "Core is inactive. To manage the inactive "
                               "core use '--remove-inactive' command.\n")
        force = args.get('force', False)
    if not force:
        _flush_core(state_dir, cache_id, core_id, operation)
    with state_mod.locked(state_dir) as state:
        cache = _cache(state, cache_id, operation)
        core = _core(cache, core_id, operation)
        if _exported(cache_id, core_id) in state['open']:
            raise Reply(1, '', '%s\nDevice opens or mount are pending to '
                               'this cache\n' % operation)
        left = state.get('remove_second_flush_fails')
        if left is not None:
            # -R phase two: the exported object is gone, the uninterruptible
            # flush of what was written meanwhile fails -> core detached
            state['remove_second_flush_fails'] = None
            core.update(status='Inactive', dirty=left)
            if datatrue.enabled(state):
                datatrue.remove(state_dir, cache_id, core_id, core, 'detach')
            devices.remove(state, _exported(cache_id, core_id))
            _update_cache_status(cache)
        elif datatrue.enabled(state):
            try:
                state['dropped_dirty_blocks'] += datatrue.remove(
                    state_dir, cache_id, core_id, core,
                    'drop' if force else 'remove')
            except datatrue.StandInError:
                # the exported object is gone: the core is left detached
                core['status'] = 'Inactive'
                devices.remove(state, _exported(cache_id, core_id))
                _update_cache_status(cache)
                left = 0
            else:
                del cache['cores'][str(core_id)]
                devices.remove(state, _exported(cache_id, core_id))
                _update_cache_status(cache)
        else:
            state['dropped_dirty_blocks'] += core['dirty']
            del cache['cores'][str(core_id)]
            devices.remove(state, _exported(cache_id, core_id))
            _update_cache_status(cache)
    if left is not None:
        return Reply(1, '', 'Failed to remove core. See dmesg for more '
                            'information\n')
    return Reply(0)


def remove_inactive(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    cache_id = _int(args, 'cache-id')
    core_id = _int(args, 'core-id')
    operation = ('Error while removing inactive core device %d from cache '
                 'instance %d' % (core_id, cache_id))
    cache = _cache(state, cache_id, operation)
    core = _core(cache, core_id, operation)
    if core['status'] != 'Inactive':
        # cas_lib.c remove_inactive_core: KCAS_ERR_CORE_IN_ACTIVE_STATE
        raise Reply(1, '', "Core is active. To manage the active core use "
                           "'--remove-core' command.\n")
    if datatrue.enabled(state):
        core = _with_counters(state, args, cache_id, core_id, core)
    if core['dirty'] and not args.get('force'):
        raise Reply(1, '', '%s\n%s' % (operation, INACTIVE_DIRTY))
    if datatrue.enabled(state):
        datatrue.forget_inactive(args['_state_dir'], state, cache_id,
                                 core_id)
    state['dropped_dirty_blocks'] += core['dirty']
    del cache['cores'][str(core_id)]
    _update_cache_status(cache)
    return Reply(0)


def list_caches(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    pool = state.get('core_pool', [])
    if not state['caches'] and not pool:
        return Reply(0, 'No caches running\n')
    by_id = args.get('by-id-path', False)
    lines = [LIST_HEADER]
    warnings = ''
    if pool:
        lines.append('core pool,-,-,-,-,-')
        lines += ['core,-,%s,Detached,-,-' % (
            path if by_id else os.path.realpath(path)) for path in pool]
    for cache_id, cache in sorted(state['caches'].items(),
                                  key=lambda item: int(item[0])):
        # during any whole-cache flush casadm shows the progress as status
        # and 'wb-><current mode>' as mode (cas_lib.c, list_caches)
        flushing = cache.get('flushing')
        if flushing:
            status, mode = ('Flushing (%3.1f %%)' % flushing,
                            'wb->%s' % cache['mode'])
        else:
            status, mode = cache['status'], cache['mode']
        # without -b the cache's start path is resolved (cas_lib.c
        # list_caches: get_dev_path), as each core's is; with -b it is
        # shown as started (a by-id link stays a link)
        disk = cache['device'] if by_id else os.path.realpath(
            cache['device'])
        lines.append('cache,%s,%s,%s,%s,-' % (cache_id, disk, status, mode))
        for core_id, core in sorted(cache['cores'].items(),
                                    key=lambda item: int(item[0])):
            disk = core['device'] if by_id or core['status'] == 'Inactive' \
                else core.get('resolved') or core['device']
            exported = '-' if core['status'] == 'Inactive' else _exported(
                int(cache_id), int(core_id))
            core_status = core['status']
            if not by_id and _unresolved(state, core):
                warnings += UNRESOLVED % (core_id, cache_id)
            if flushing:
                core_status = 'Flushing (%3.1f %%)' % (
                    0.0 if core['dirty'] else 100.0)
            lines.append('core,%s,%s,%s,-,%s' % (core_id, disk,
                                                 core_status, exported))
    if args.get('output-format') != 'csv':
        raise Reply(1, '', 'Only CSV output is simulated\n')
    return Reply(0, '\n'.join(lines) + '\n', warnings)


def _with_counters(state: dict[str, Any], args: dict[str, Any],
                   cache_id: int, core_id: int, core: dict[str, Any]
                   ) -> dict[str, Any]:
    """*core* with a data-true instance's real counters."""
    counters = datatrue.counters(args['_state_dir'], cache_id)
    if counters is None:
        return core
    return datatrue.overlay_core(core, counters['cores'].get(str(core_id),
                                                             {}))


def stats(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    # statistics_model.c, cache_status: its own two refusals
    cache_id = _int(args, 'cache-id')
    cache = state['caches'].get(str(cache_id))
    if cache is None:
        raise Reply(1, '', 'Cache Id %d not running\n' % cache_id)
    if datatrue.enabled(state):
        counters = datatrue.counters(args['_state_dir'], cache_id)
        if counters is not None:
            cache = datatrue.overlay_cache(cache, counters)
    release = releases.of(state.get('version'))
    if 'io-class-id' in args:
        return _io_class_stats(cache, args, release)
    if 'core-id' in args:
        core_id = _int(args, 'core-id')
        core = cache['cores'].get(str(core_id))
        if core is None:
            raise Reply(1, '', 'No such core device in cache.\n')
        return Reply(0, stats_mod.core_csv(cache_id, core_id, cache, core,
                                           args.get('by-id-path', False),
                                           release, state.get('now')))
    # the cache form resolves every core's path, even with --by-id-path
    warnings = ''.join(UNRESOLVED % (core_id, cache_id)
                       for core_id, core in sorted(cache['cores'].items())
                       if _unresolved(state, core))
    return Reply(0, stats_mod.cache_csv(cache_id, cache, release,
                                        state.get('now')), warnings)


def _io_class_stats(cache: dict[str, Any], args: dict[str, Any],
                    release: releases.Release) -> Reply:
    """``-P -i N -d [ID]``: every configured class, or class ID only."""
    rows = cache.get('io_classes', ioclass.DEFAULT)
    class_id = None
    if args['io-class-id']:
        class_id = _int(args, 'io-class-id')
        if class_id not in {row[0] for row in rows}:
            raise Reply(1, '', 'IO class %d is not configured.\n'
                        % class_id)
    if 'core-id' in args:
        core_id = str(_int(args, 'core-id'))
        if core_id not in cache['cores']:
            raise Reply(1, '', 'No such core device in cache.\n')
        cache = dict(cache, cores={core_id: cache['cores'][core_id]})
    if args.get('output-format') != 'csv':
        raise Reply(1, '', 'Only CSV output is simulated\n')
    return Reply(0, stats_mod.io_class_csv(cache, rows, release, class_id))


def start_cache(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    """-S: a fresh instance, or -l: the one in the device's metadata.

    A stopped instance leaves its metadata (with its cores' dirty data) on
    the cache device: -S refuses the device without --force.
    """
    if args.get('load'):
        if {'force', 'cache-id', 'cache-mode', 'cache-line-size'} & set(args):
            raise Reply(1, '', LOAD_FORBIDDEN)
        return _load_cache(state, args)
    cache_id = _int(args, 'cache-id')
    device = args.get('device', '-')
    operation = 'Error inserting cache %d' % cache_id
    if device != '-':
        _by_id_rule(device)
    if any(c['device'] == device for c in state['caches'].values()):
        raise Reply(1, '', "%s\nCache device '%s' is already used as cache."
                           "\n" % (operation, device))
    if str(cache_id) in state['caches']:
        raise Reply(1, '', '%s\nCache ID already exists\n' % operation)
    metadata = state.setdefault('metadata', {})
    if device in metadata and not args.get('force'):
        raise Reply(1, '', '%s\n%s' % (
            operation, releases.of(state.get('version')).old_metadata))
    old = metadata.pop(device, None)
    if old is not None:
        # --force discards the metadata, dirty lines included
        state['dropped_dirty_blocks'] += sum(
            c.get('dirty', 0) for c in old['cache']['cores'].values())
    state['caches'][str(cache_id)] = {
        'device': device, 'mode': args.get('cache-mode', 'wt'),
        'status': 'Running', 'size_blocks': 2621440, 'cores': {},
        'line_size_kib': int(args.get('cache-line-size', 4)),
        'params': sim_params.defaults()}
    if datatrue.enabled(state):
        datatrue.discard(args['_state_dir'], cache_id)
    return Reply(0, 'Successfully added cache instance %d\n' % cache_id)


def _load_cache(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    """-S -d DEV -l: each core whose link resolves comes back Active."""
    device = args.get('device', '')
    _by_id_rule(device)
    saved = state.get('metadata', {}).pop(device, None)
    if saved is None:
        raise Reply(1, '', 'Error inserting cache 1\nNo metadata found on '
                           'device\n')
    cache_id, cache = saved['id'], saved['cache']
    state['caches'][str(cache_id)] = cache
    warnings = ''
    for core_id, core in sorted(cache['cores'].items()):
        resolved = os.path.realpath(core['device'])
        if resolved in state['devices']:
            _activate(state, cache_id, int(core_id), core, resolved, args,
                      'Error inserting cache %d' % cache_id)
        else:
            core.update(status='Inactive')
            core.pop('resolved', None)
            warnings += UNRESOLVED % (core_id, cache_id)
    _update_cache_status(cache)
    if cache['status'] == 'Incomplete':
        warnings += INCOMPLETE_WARNING
    return Reply(0, 'Successfully added cache instance %d\n' % cache_id,
                 warnings)


def stop_cache(state_dir: str, args: dict[str, Any]) -> Reply:
    """-T: flush (unless -n), then stop; refused while an export is open.

    The flush comes first, so a -T refused because /dev/casX-Y is open
    has written all dirty data back already. The metadata stays on the
    cache device (-S -l loads it); a core whose device is gone loses its
    dirty data with -n.
    """
    cache_id = _int(args, 'cache-id')
    operation = 'Error while stopping cache %d' % cache_id
    if not args.get('no-data-flush'):
        flush(state_dir, 'flush-cache', {'cache-id': cache_id}, operation)
    with state_mod.locked(state_dir) as state:
        cache = _cache(state, cache_id, operation)
        exported = [_exported(cache_id, int(core_id))
                    for core_id in cache['cores']]
        if set(exported) & set(state['open']):
            raise Reply(1, '', '%s\nDevice opens or mount are pending to '
                               'this cache\n' % operation)
        stop_now(state_dir, state, cache_id)
    return Reply(0, 'Successfully stopped cache %d\n' % cache_id)


def stop_now(state_dir: str, state: dict[str, Any], cache_id: int) -> None:
    """Stop a cache as -T -n does; its metadata stays on the device."""
    cache = state['caches'].pop(str(cache_id))
    if datatrue.enabled(state):
        state['caches'][str(cache_id)] = cache
        datatrue.stop(state_dir, state, cache_id)
        del state['caches'][str(cache_id)]
    for core_id, core in cache['cores'].items():
        devices.remove(state, _exported(cache_id, int(core_id)))
        if _unresolved(state, core):
            state['dropped_dirty_blocks'] += core['dirty']
            core.update(dirty=0, status='Inactive')
            core.pop('dirty_since', None)
    state.setdefault('metadata', {})[cache['device']] = {
        'id': cache_id, 'cache': cache}


def set_cache_mode(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    cache = _cache(state, _int(args, 'cache-id'),
                   'Error while setting cache mode')
    if cache['mode'] in ('wb', 'wo') and 'flush' not in args:
        raise Reply(1, '', "Option '--flush-cache' is required when leaving "
                           "write-back mode\n")
    if args.get('flush') == 'yes':
        for core in cache['cores'].values():
            core['clean'] += core['dirty']
            core['dirty'] = 0
    cache['mode'] = args.get('cache-mode', cache['mode'])
    if datatrue.enabled(state):
        cache_id = _int(args, 'cache-id')
        try:
            if args.get('flush') == 'yes':
                datatrue.control(args['_state_dir'], cache_id, 'flush')
            datatrue.control(args['_state_dir'], cache_id,
                             'mode %s' % cache['mode'])
        except datatrue.StandInError:
            raise Reply(1, '', 'Error while writing to core device\n')
    return Reply(0)


def _io_class_text(args: dict[str, Any]) -> str:
    path = args.get('file', '')
    if not path:
        raise Reply(1, '', 'Invalid path of configuration file\n')
    if path == '-':
        return sys.stdin.read()
    try:
        with open(path) as config:
            return config.read()
    except OSError:
        raise Reply(1, '', 'Cannot open configuration file %s\n' % path)


def io_class(state_dir: str, args: dict[str, Any]) -> Reply:
    """``-C -C`` loads a table (replacing it whole), ``-C -L`` lists it."""
    subcmd = args.get('subcmd')
    if subcmd is None:
        raise Reply(1, '', 'Invalid or missing first sub-command parameter. '
                           'Expected one of the: {--load-config (-C)|'
                           '--list (-L)}\n')
    missing = [name for name, needed in (
        ("'--cache-id (-i)'", 'cache-id' not in args),
        ("'--file (-f)'", subcmd == 'load-config' and 'file' not in args))
        if needed]
    if missing:
        raise Reply(1, '', ''.join('Option %s is missing\n' % name
                                   for name in missing))
    cache_id = _int(args, 'cache-id')
    if subcmd == 'list':
        if args.get('output-format') != 'csv':
            raise Reply(1, '', 'Only CSV output is simulated\n')
        with state_mod.locked(state_dir) as state:
            cache = _cache_only(state, cache_id)
            return Reply(0, ioclass.list_csv(cache.get('io_classes',
                                                       ioclass.DEFAULT)))
    with state_mod.locked(state_dir) as state:
        release = releases.of(state.get('version'))
    try:
        rows = ioclass.parse(_io_class_text(args),
                             release.class_0_name_parsed)
    except ioclass.IoClassError as exc:
        raise Reply(1, '', str(exc))
    with state_mod.locked(state_dir) as state:
        cache = _cache_only(state, cache_id)
        if not rows or rows[0][0] != 0:
            # a table without class 0 leaves the current class 0 in place
            rows = cache.get('io_classes', ioclass.DEFAULT)[:1] + rows
        try:
            ioclass.check_class_0(rows)
            ioclass.check_rules(rows)
        except ioclass.IoClassError as exc:
            raise Reply(1, '', str(exc))
        if datatrue.enabled(state):
            engine_rows = [[i, name, prio, percent / 100.0]
                           for i, name, prio, percent in rows]
            try:
                datatrue.ensure_running(state_dir, state, cache_id)
                datatrue.control(state_dir, cache_id,
                                 'ioclass %s' % json.dumps(engine_rows))
            except datatrue.StandInError as exc:
                raise Reply(1, '', '%s\n' % exc)
        cache['io_classes'] = rows
    return Reply(0)


def remove_detached(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    """--remove-detached -d DEV: take a device out of the core pool."""
    path = args.get('device', '')
    _by_id_rule(path)
    pool = state.get('core_pool', [])
    if path not in pool:
        # cas_lib.c core_pool_remove (the kernel's own reason follows;
        # the stand-in does not know its text)
        raise Reply(1, '', 'Error while removing device %s from core pool\n'
                    % path)
    pool.remove(path)
    return Reply(0)


def _cache_only(state: dict[str, Any], cache_id: int) -> dict[str, Any]:
    """The cache, or casadm's bare "Cache ID does not exist" (print_err)."""
    cache = state['caches'].get(str(cache_id))
    if cache is None:
        raise Reply(1, '', 'Cache ID does not exist\n')
    return cache


def version(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    """-V: exit 0 even without the module (cas_main.c handle_version)."""
    release = state.get('version') or VERSION
    module = release if state['module_loaded'] else 'Not Loaded'
    # the third row names the stand-in: real casadm never prints it
    return Reply(0, 'Name,Version\nCAS Cache Kernel Module,%s\n'
                    'CAS CLI Utility,%s\n%s,%s\n' % (
                        module, release, stand_in.SIMULATOR_ROW,
                        release))


def _old_flush_syntax(state: dict[str, Any], verb: str,
                      argv: list[str]) -> tuple[str, Optional[Reply]]:
    """Per-core flush is ``-E -i -j`` before v24.9, ``-F -i -j`` since."""
    old = releases.version_tuple(state.get('version')) < PER_CORE_F_SINCE
    if verb == 'flush-core' and old:
        option = next(t for t in argv if t in ('-j', '--core-id'))
        return verb, Reply(1, TRY_HELP, 'Unrecognized option %s\n' % option)
    if verb == 'flush-core-old':
        if not old:
            command = next(t for t in argv if t in ('-E', '--flush-core'))
            return verb, Reply(1, TRY_HELP,
                               'Unrecognized command %s\n' % command)
        return 'flush-core', None
    return verb, None


LOCKED = {'add-core': add_core, 'try-add': try_add,
          'remove-inactive': remove_inactive, 'list-caches': list_caches,
          'stats': stats, 'start-cache': start_cache,
          'set-cache-mode': set_cache_mode, 'version': version,
          'remove-detached': remove_detached}


def run(state_dir: str, argv: list[str]) -> tuple[str, Reply]:
    verb = 'unknown'
    if sim_params.handles(argv):
        return sim_params.run(state_dir, argv)
    try:
        verb, args = parse(argv)
        args['_state_dir'] = state_dir
        with state_mod.locked(state_dir) as state:
            udev.loader_pass(state, functools.partial(
                activate_inactive, state_dir=state_dir))
            verb, refused = _old_flush_syntax(state, verb, argv)
            stop = state.get('stop_before')
            if stop and stop['verb'] == verb:
                # the operator stopped the cache just before this call
                state['stop_before'] = None
                stop_now(state_dir, state, stop['cache_id'])
            fault = faults.take(state, verb)
            loaded = state['module_loaded']
            latency = state['latency_ms'] / 1000.0
        if refused is not None:
            return verb, refused
        if not loaded and verb != 'version':
            extra = 'Error getting caches list\n' if (
                verb == 'list-caches') else ''
            return verb, Reply(1, 'Is the kernel module loaded?\n' + extra,
                               'Device /dev/cas_ctrl not found\n')
        if fault is not None:
            code = faults.play(fault)
            return verb, Reply(code)
        if latency:
            time.sleep(latency)
        if verb in LOCKED:
            with state_mod.locked(state_dir) as state:
                return verb, LOCKED[verb](state, args)
        if verb in ('flush-cache', 'flush-core'):
            return verb, flush(state_dir, verb, args)
        if verb == 'remove-core':
            return verb, remove_core(state_dir, args)
        if verb == 'stop-cache':
            return verb, stop_cache(state_dir, args)
        if verb == 'io-class':
            return verb, io_class(state_dir, args)
        return verb, Reply(1, '', 'Command %s is not simulated\n' % verb)
    except Reply as reply:
        return verb, reply
    except KeyboardInterrupt:
        return verb, Reply(2, '', 'Operation interrupted\n')


def main(argv: Optional[list[str]] = None) -> int:
    return state_mod.tool_main('casadm', run, argv)


if __name__ == '__main__':
    sys.exit(main())
