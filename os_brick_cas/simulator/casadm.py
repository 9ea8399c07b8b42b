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

Output formats, messages and exit codes follow casadm 26.03 (see
doc/source/contributor/simulator.rst for the sources of each string).
"""

import json
import os
import signal
import sys
import time
from typing import Any, Optional

from os_brick_cas.simulator import datatrue
from os_brick_cas.simulator import devices
from os_brick_cas.simulator import faults
from os_brick_cas.simulator import ioclass
from os_brick_cas.simulator import state as state_mod
from os_brick_cas.simulator import stats as stats_mod

VERSION = '26.03.2.1032.release'
LIST_HEADER = 'type,id,disk,status,write policy,device'
WHITELIST_PREFIXES = ('/dev/cas', '/dev/ram', '/dev/nullb', '/dev/drbd')

VERBS = {'-L': 'list-caches', '--list-caches': 'list-caches',
         '-A': 'add-core', '--add-core': 'add-core',
         '-R': 'remove-core', '--remove-core': 'remove-core',
         '--remove-inactive': 'remove-inactive',
         '-F': 'flush-cache', '--flush-cache': 'flush-cache',
         '-P': 'stats', '--stats': 'stats',
         '-V': 'version', '--version': 'version',
         '-S': 'start-cache', '--start-cache': 'start-cache',
         '-T': 'stop-cache', '--stop-cache': 'stop-cache',
         '-Q': 'set-cache-mode', '--set-cache-mode': 'set-cache-mode',
         '-C': 'io-class', '--io-class': 'io-class'}
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
              '--filter': 'filter', '--file': 'file'}
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
        raise Reply(1, '', '%s\nCache ID does not exist\n' % operation)
    return cache


def _core(cache: dict[str, Any], core_id: int, operation: str
          ) -> dict[str, Any]:
    core = cache['cores'].get(str(core_id))
    if core is None:
        raise Reply(1, '', '%s\nCore ID does not exist\n' % operation)
    return core


def _exported(cache_id: int, core_id: int) -> str:
    return '/dev/cas%d-%d' % (cache_id, core_id)


def _check_device(state: dict[str, Any], path: str) -> str:
    """Apply casadm's device-path rules; return the resolved device."""
    if not os.path.lexists(path):
        raise Reply(1, '', 'Device %s not found.\n' % path)
    if not (os.path.dirname(path) == devices.BY_ID or
            path.startswith(WHITELIST_PREFIXES)):
        raise Reply(1, '', 'Please use correct by-id path to the device '
                           '%s.\n' % path)
    resolved = os.path.realpath(path)
    if resolved not in state['devices']:
        raise Reply(1, '', 'Core object %s is not supported!\n' % path)
    return resolved


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
    for other_id, other in state['caches'].items():
        for core in other['cores'].values():
            same_device = (core.get('resolved') == resolved and
                           core['status'] != 'Inactive')
            same_link_elsewhere = (core['device'] == path and
                                   other_id != str(cache_id))
            if same_device or same_link_elsewhere:
                raise Reply(1, '', "Core device '%s' is already cached.\n"
                            % path)
    if any(c['device'] == path for c in cache['cores'].values()):
        raise Reply(1, '', '%s\nDevice already added as a core\n'
                    % operation)
    if path in state['open'] or resolved in state['open']:
        raise Reply(1, '', "Failed to open '%s' device exclusively. Please "
                           "close all applications accessing it or unmount "
                           "the device.\n" % path)
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
    cache = _cache(state, cache_id, operation)
    core = _core(cache, core_id, operation)
    if core['device'] != path or core['status'] != 'Inactive':
        raise Reply(1, '', '%s\nCore device not available\n' % operation)
    _activate(state, cache_id, core_id, core, resolved, args, operation)
    _update_cache_status(cache)
    return Reply(0, 'Successfully added device in try add mode %s\n' % path)


def _flush_core(state_dir: str, cache_id: int, core_id: int,
                operation: str) -> None:
    """Write a core's dirty data back, taking time per dirty block."""
    with state_mod.locked(state_dir) as state:
        core = _core(_cache(state, cache_id, operation), core_id, operation)
        if core['status'] == 'Inactive':
            raise Reply(1, '', '%s\nCore device is in inactive state\n'
                        % operation)
        data_true = datatrue.enabled(state)
        delay = core['dirty'] * state['flush_ms_per_block'] / 1000.0
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
        time.sleep(delay)
    with state_mod.locked(state_dir) as state:
        core = state['caches'][str(cache_id)]['cores'].get(str(core_id))
        if core is not None:
            core['clean'] += core['dirty']
            state['flushed_blocks'] = state.get('flushed_blocks', 0) + \
                core['dirty']
            core['dirty'] = 0


def _interrupt_flush(signum, frame):
    raise Reply(2, '', 'Flushing of core interrupted\n')


def flush(state_dir: str, verb: str, args: dict[str, Any]) -> Reply:
    cache_id = _int(args, 'cache-id')
    if verb == 'flush-core':
        core_ids = [_int(args, 'core-id')]
        operation = 'Error while flushing core %d of cache %d' % (
            core_ids[0], cache_id)
    else:
        operation = 'Error while flushing cache %d' % cache_id
        with state_mod.locked(state_dir) as state:
            cache = _cache(state, cache_id, operation)
            core_ids = [int(i) for i, c in cache['cores'].items()
                        if c['status'] != 'Inactive']
            cache['flushed_before'] = state.get('flushed_blocks', 0)
    try:
        for done, core_id in enumerate(core_ids, 1):
            _flush_core(state_dir, cache_id, core_id, operation)
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
        raise Reply(1, '', '%s\nCore is active\n' % operation)
    if datatrue.enabled(state):
        core = _with_counters(state, args, cache_id, core_id, core)
    if core['dirty'] and not args.get('force'):
        raise Reply(1, '', '%s\nInactive core has dirty data. Use --force '
                           'to remove it anyway (the data will be lost)\n'
                    % operation)
    if datatrue.enabled(state):
        datatrue.forget_inactive(args['_state_dir'], state, cache_id,
                                 core_id)
    state['dropped_dirty_blocks'] += core['dirty']
    del cache['cores'][str(core_id)]
    _update_cache_status(cache)
    return Reply(0)


def list_caches(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    if not state['caches']:
        return Reply(0, 'No caches running\n')
    by_id = args.get('by-id-path', False)
    lines = [LIST_HEADER]
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
        lines.append('cache,%s,%s,%s,%s,-' % (cache_id, cache['device'],
                                              status, mode))
        for core_id, core in sorted(cache['cores'].items(),
                                    key=lambda item: int(item[0])):
            disk = core['device'] if by_id or core['status'] == 'Inactive' \
                else core.get('resolved') or core['device']
            exported = '-' if core['status'] == 'Inactive' else _exported(
                int(cache_id), int(core_id))
            core_status = core['status']
            if flushing:
                core_status = 'Flushing (%3.1f %%)' % (
                    0.0 if core['dirty'] else 100.0)
            lines.append('core,%s,%s,%s,-,%s' % (core_id, disk,
                                                 core_status, exported))
    if args.get('output-format') != 'csv':
        raise Reply(1, '', 'Only CSV output is simulated\n')
    return Reply(0, '\n'.join(lines) + '\n')


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
    cache_id = _int(args, 'cache-id')
    cache = _cache(state, cache_id, 'Error while retrieving stats')
    if datatrue.enabled(state):
        counters = datatrue.counters(args['_state_dir'], cache_id)
        if counters is not None:
            cache = datatrue.overlay_cache(cache, counters)
    if 'core-id' in args:
        core_id = _int(args, 'core-id')
        core = _core(cache, core_id, 'Error while retrieving stats')
        return Reply(0, stats_mod.core_csv(cache_id, core_id, cache, core,
                                           args.get('by-id-path', False)))
    return Reply(0, stats_mod.cache_csv(cache_id, cache))


def start_cache(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    cache_id = _int(args, 'cache-id')
    mode = args.get('cache-mode', 'wt')
    if str(cache_id) in state['caches']:
        raise Reply(1, '', 'Error inserting cache %d\nCache ID already '
                           'exists\n' % cache_id)
    state['caches'][str(cache_id)] = {
        'device': args.get('device', '-'), 'mode': mode,
        'status': 'Running', 'size_blocks': 2621440, 'cores': {}}
    if datatrue.enabled(state) and not args.get('load'):
        datatrue.discard(args['_state_dir'], cache_id)
    return Reply(0, 'Successfully added cache instance %d\n' % cache_id)


def stop_cache(state_dir: str, args: dict[str, Any]) -> Reply:
    cache_id = _int(args, 'cache-id')
    operation = 'Error while stopping cache %d' % cache_id
    if not args.get('no-data-flush'):
        flush(state_dir, 'flush-cache', {'cache-id': cache_id})
    with state_mod.locked(state_dir) as state:
        cache = _cache(state, cache_id, operation)
        if datatrue.enabled(state):
            datatrue.stop(state_dir, state, cache_id)
        for core_id in cache['cores']:
            devices.remove(state, _exported(cache_id, int(core_id)))
        del state['caches'][str(cache_id)]
    return Reply(0)


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
    try:
        rows = ioclass.parse(_io_class_text(args))
    except ioclass.IoClassError as exc:
        raise Reply(1, '', str(exc))
    with state_mod.locked(state_dir) as state:
        cache = _cache_only(state, cache_id)
        try:
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


def _cache_only(state: dict[str, Any], cache_id: int) -> dict[str, Any]:
    """The cache, or casadm's bare "Cache ID does not exist" (print_err)."""
    cache = state['caches'].get(str(cache_id))
    if cache is None:
        raise Reply(1, '', 'Cache ID does not exist\n')
    return cache


def version(state: dict[str, Any], args: dict[str, Any]) -> Reply:
    return Reply(0, 'Name,Version\nCAS Cache Kernel Module,%s\n'
                    'CAS CLI Utility,%s\n' % (VERSION, VERSION))


LOCKED = {'add-core': add_core, 'try-add': try_add,
          'remove-inactive': remove_inactive, 'list-caches': list_caches,
          'stats': stats, 'start-cache': start_cache,
          'set-cache-mode': set_cache_mode, 'version': version}


def run(state_dir: str, argv: list[str]) -> tuple[str, Reply]:
    verb = 'unknown'
    try:
        verb, args = parse(argv)
        args['_state_dir'] = state_dir
        with state_mod.locked(state_dir) as state:
            fault = faults.take(state, verb)
            loaded = state['module_loaded']
            latency = state['latency_ms'] / 1000.0
        if not loaded:
            return verb, Reply(1, 'Is the kernel module loaded?\n',
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
