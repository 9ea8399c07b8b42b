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

"""Privileged casadm invocations, one entry point per operation.

Each returns ``(exit_code, stdout, stderr)``; turning that into records or
exceptions is :mod:`os_brick_cas.casadm`'s job, outside the daemon.
"""

import csv
import io
import re
import shutil
import signal
import subprocess
import threading
from typing import Optional

from oslo_concurrency import processutils
from oslo_log import log as logging

from os_brick_cas import exception
from os_brick_cas.opencas import casadm_params
from os_brick_cas import privileged
from os_brick_cas import validation

LOG = logging.getLogger(__name__)

#: exit code reported when casadm is not on PATH (as a shell would).
NOT_FOUND = 127
#: exit code reported when a call ran out of time and was stopped.
TIMED_OUT = -1

Result = tuple[int, str, str]

#: seconds a flush gets to stop after SIGINT before it is killed, and a
#: killed process gets to exit before it is left to a reaper thread.
_GRACE_SECONDS = 10


def _run(args: list[str], timeout: int, interruptible: bool = False,
         stdin: Optional[str] = None) -> Result:
    """Run casadm with *args*, stopped once *timeout* seconds have passed.

    casadm ignores SIGINT outside a flush, so a call that is not
    *interruptible* is killed at once; a flush (or the flush inside a core
    removal) is first interrupted with SIGINT, which stops it with its
    dirty data still in the cache, and killed if it does not stop.
    """
    binary = shutil.which('casadm')
    if binary is None:
        return NOT_FOUND, '', 'casadm: command not found'
    started: list[subprocess.Popen] = []
    try:
        out, err = processutils.execute(
            binary, *args, check_exit_code=[0],
            timeout=validation.timeout(timeout),
            on_execute=started.append, process_input=stdin)
    except processutils.ProcessExecutionError as exc:
        return (exc.exit_code if exc.exit_code is not None else 1,
                exc.stdout or '', exc.stderr or '')
    except subprocess.TimeoutExpired:
        _stop(started[0], args, timeout, interruptible)
        return TIMED_OUT, '', 'timed out after %s s' % timeout
    return 0, out, err


def _stop(proc: subprocess.Popen, args: list[str], timeout: int,
          interruptible: bool) -> None:
    """Stop a casadm call that ran out of time; never wait unbounded."""
    command = ' '.join(['casadm'] + args)
    if interruptible:
        LOG.warning('%s ran out of time (%s s); interrupting it.',
                    command, timeout)
        proc.send_signal(signal.SIGINT)
        if _reaped(proc):
            return
    LOG.warning('%s ran out of time (%s s); killing it.', command, timeout)
    proc.kill()
    if not _reaped(proc):
        # e.g. stuck in an uninterruptible ioctl: do not hold this worker
        LOG.error('%s (pid %s) did not exit after SIGKILL; leaving it to '
                  'a reaper thread. Check the host (dmesg) and Open CAS.',
                  command, proc.pid)
        threading.Thread(target=proc.communicate, daemon=True,
                         name='casadm-reaper-%s' % proc.pid).start()


def _reaped(proc: subprocess.Popen) -> bool:
    try:
        proc.communicate(timeout=_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        return False
    return True


@privileged.default.entrypoint
def list_caches(timeout: int) -> Result:
    """``casadm --list-caches`` in CSV with by-id paths."""
    return _run(['--list-caches', '--output-format', 'csv', '--by-id-path'],
                timeout)


@privileged.default.entrypoint
def add_core(cache_id: int, core_device: str, timeout: int,
             core_id: Optional[int] = None) -> Result:
    """Add *core_device* (a /dev/disk/by-id link) to cache *cache_id*.

    With *core_id*, as that core id; without, casadm picks one.
    """
    argv = ['--add-core', '--cache-id', str(validation.cache_id(cache_id)),
            '--core-device', validation.by_id_path(core_device)]
    if core_id is not None:
        argv += ['--core-id', str(validation.core_id(core_id))]
    return _run(argv, timeout)


@privileged.default.entrypoint
def try_add_core(cache_id: int, core_id: int, core_device: str,
                 timeout: int) -> Result:
    """Re-activate inactive core *core_id* of *cache_id* on its device."""
    return _run(['--script', '--add-core', '--try-add',
                 '--cache-id', str(validation.cache_id(cache_id)),
                 '--core-id', str(validation.core_id(core_id)),
                 '--core-device', validation.by_id_path(core_device)],
                timeout)


@privileged.default.entrypoint
def remove_detached(core_device: str, timeout: int) -> Result:
    """Take *core_device* out of Open CAS's core pool (no cache data)."""
    return _run(['--remove-detached',
                 '--device', validation.by_id_path(core_device)], timeout)


@privileged.flush.entrypoint
def remove_core(cache_id: int, core_id: int, timeout: int) -> Result:
    """Remove an active core; casadm flushes it first. Never forced.

    Runs on the flush daemon: the removal's flush is interruptible.
    """
    return _run(['--remove-core',
                 '--cache-id', str(validation.cache_id(cache_id)),
                 '--core-id', str(validation.core_id(core_id))],
                timeout, interruptible=True)


@privileged.default.entrypoint
def remove_inactive_core(cache_id: int, core_id: int, timeout: int
                         ) -> Result:
    """Remove an inactive core; casadm refuses if it is dirty. Never forced."""
    return _run(['--remove-inactive',
                 '--cache-id', str(validation.cache_id(cache_id)),
                 '--core-id', str(validation.core_id(core_id))], timeout)


@privileged.flush.entrypoint
def flush(cache_id: int, core_id: Optional[int], timeout: int) -> Result:
    """Flush one core (or, with *core_id* None, the whole cache)."""
    args = ['--flush-cache', '--cache-id', str(validation.cache_id(cache_id))]
    if core_id is not None:
        args += ['--core-id', str(validation.core_id(core_id))]
    return _run(args, timeout, interruptible=True)


@privileged.flush.entrypoint
def stop_cache(cache_id: int, timeout: int) -> Result:
    """Stop a cache instance; casadm flushes it first. Never --no-data-flush.

    Runs on the flush daemon: the stop's flush is interruptible, and an
    interrupted or failed flush leaves the instance running.
    """
    return _run(['--stop-cache',
                 '--cache-id', str(validation.cache_id(cache_id))],
                timeout, interruptible=True)


@privileged.default.entrypoint
def stats(cache_id: int, core_id: Optional[int], timeout: int) -> Result:
    """Statistics of a cache (or one of its cores) in CSV."""
    args = ['--stats', '--cache-id', str(validation.cache_id(cache_id))]
    if core_id is not None:
        args += ['--core-id', str(validation.core_id(core_id))]
    return _run(args + ['--output-format', 'csv', '--by-id-path'], timeout)


@privileged.default.entrypoint
def io_class_stats(cache_id: int, timeout: int) -> Result:
    """Usage and requests of every IO class of a cache, in CSV."""
    return _run(['--stats', '--cache-id', str(validation.cache_id(cache_id)),
                 '--output-format', 'csv', '--io-class-id'], timeout)


@privileged.default.entrypoint
def version(timeout: int) -> Result:
    """Versions of casadm and the kernel module in CSV."""
    return _run(['--version', '--output-format', 'csv'], timeout)


@privileged.default.entrypoint
def discard_core(cache_id: int, core_id: int, inactive: bool,
                 timeout: int) -> Result:
    """Remove a core WITHOUT flushing it: its dirty data is dropped.

    Only for ``os-brick-cas discard``, after Cinder recorded the data's
    owner as lost and the operator confirmed.
    """
    verb = '--remove-inactive' if inactive else '--remove-core'
    return _run([verb, '--cache-id', str(validation.cache_id(cache_id)),
                 '--core-id', str(validation.core_id(core_id)), '--force'],
                timeout)


#: the IO-class rules os-brick-cas composes (validated before loading)
_IO_CLASS_NAME = re.compile(r'unclassified|core_id:eq:\d{1,4}&done')


def _io_class_csv(rows: list[tuple[int, str, Optional[int], float]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(['IO class id', 'IO class name', 'Eviction priority',
                     'Allocation'])
    for class_id, name, priority, allocation in rows:
        class_id = validation.io_class_id(class_id)
        if not isinstance(name, str) or not _IO_CLASS_NAME.fullmatch(name):
            raise exception.InvalidInput(what='IO class rule', value=name,
                                         reason='not a rule os-brick-cas '
                                                'composes')
        if priority is not None:
            priority = validation.io_class_priority(priority)
        if isinstance(allocation, bool) or not isinstance(
                allocation, (int, float)) or not 0 <= allocation <= 1:
            raise exception.InvalidInput(what='IO class allocation',
                                         value=allocation,
                                         reason='must be 0..1')
        writer.writerow([class_id, name,
                         '' if priority is None else priority,
                         '%.2f' % allocation])
    return buffer.getvalue()


@privileged.default.entrypoint
def load_io_classes(cache_id: int,
                    rows: list[tuple[int, str, Optional[int], float]],
                    timeout: int) -> Result:
    """Replace the IO-class table of *cache_id* (the CSV goes on stdin)."""
    return _run(['--io-class', '--load-config',
                 '--cache-id', str(validation.cache_id(cache_id)),
                 '--file', '-'], timeout, stdin=_io_class_csv(
                     [tuple(row) for row in rows]))


@privileged.default.entrypoint
def list_io_classes(cache_id: int, timeout: int) -> Result:
    """The IO-class table of *cache_id* in CSV."""
    return _run(['--io-class', '--list',
                 '--cache-id', str(validation.cache_id(cache_id)),
                 '--output-format', 'csv'], timeout)


@privileged.default.entrypoint
def start_cache(device: str, cache_id: int, mode: str, line_size_kib: int,
                timeout: int) -> Result:
    """Start a fresh cache instance on *device*. Never forced.

    casadm refuses a device holding Open CAS metadata without --force;
    that refusal is kept (the metadata may hold dirty data).
    """
    line = line_size_kib
    if isinstance(line, bool) or line not in (
            casadm_params.LINE_SIZES_KIB):
        raise exception.InvalidInput(what='cache line size', value=line,
                                     reason='must be 4, 8, 16, 32 or 64')
    return _run(['--start-cache',
                 '--cache-device', validation.cache_device(device),
                 '--cache-id', str(validation.cache_id(cache_id)),
                 '--cache-mode', validation.cache_mode(mode).value,
                 '--cache-line-size', str(line)], timeout)


@privileged.default.entrypoint
def load_cache(device: str, timeout: int) -> Result:
    """Load the cache instance whose metadata *device* holds (``-S -l``).

    casadm takes no id, mode or line size with --load: they come from
    the metadata.
    """
    return _run(['--start-cache', '--cache-device',
                 validation.cache_device(device), '--load'], timeout)


@privileged.default.entrypoint
def check_cache_device(device: str, timeout: int) -> Result:
    """Whether *device* holds Open CAS metadata, clean, dirty (CSV)."""
    return _run(['--script', '--check-cache-device', '--cache-device',
                 validation.cache_device(device)], timeout)


def _param_args(namespace: str, values: list[tuple[str, object]]
                ) -> list[str]:
    known = {param.option: param
             for param in casadm_params.of_namespace(namespace)}
    if not known:
        raise exception.InvalidInput(what='parameter namespace',
                                     value=namespace, reason='unknown')
    args = []
    for option, value in values:
        param = known.get(option)
        if param is None:
            raise exception.InvalidInput(
                what='%s parameter' % namespace, value=option,
                reason='unknown')
        if param.choices:
            if value not in param.choices:
                raise exception.InvalidInput(
                    what=option, value=value,
                    reason='must be one of %s' % ', '.join(param.choices))
        elif isinstance(value, bool) or not isinstance(value, int) or not (
                param.low <= value <= param.high):
            raise exception.InvalidInput(
                what=option, value=value, reason='must be an integer '
                '%d..%d' % (param.low, param.high))
        args += ['--' + option, str(value)]
    if not args:
        raise exception.InvalidInput(what='%s parameters' % namespace,
                                     value=values, reason='none given')
    return args


def _target(namespace: str, cache_id: int, core_id: Optional[int]
            ) -> list[str]:
    args = ['--name', namespace,
            '--cache-id', str(validation.cache_id(cache_id))]
    if core_id is not None:
        args += ['--core-id', str(validation.core_id(core_id))]
    return args


@privileged.default.entrypoint
def set_param(namespace: str, cache_id: int, core_id: Optional[int],
              values: list[tuple[str, object]], timeout: int) -> Result:
    """``casadm --set-param`` of known *values* in *namespace*.

    Without *core_id*, a seq-cutoff value applies to every core.
    """
    values = [tuple(value) for value in values]
    return _run(['--set-param'] + _target(namespace, cache_id, core_id) +
                _param_args(namespace, values), timeout)


@privileged.default.entrypoint
def get_param(namespace: str, cache_id: int, core_id: Optional[int],
              timeout: int) -> Result:
    """``casadm --get-param`` of *namespace* in CSV."""
    if not casadm_params.of_namespace(namespace):
        raise exception.InvalidInput(what='parameter namespace',
                                     value=namespace, reason='unknown')
    return _run(['--get-param'] + _target(namespace, cache_id, core_id) +
                ['--output-format', 'csv'], timeout)
