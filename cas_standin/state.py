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

"""Persistent state of a simulated compute host, shared by the stand-ins.

One JSON document guarded by an flock, so concurrent ``casadm``/``rbd``
invocations see each other's changes atomically, plus a JSON-lines log of
every invocation. Standard library only: the stand-ins start often.
"""

import contextlib
import fcntl
import json
import os
import sys
import time
from typing import Any, Callable, Iterator, Optional

ENV = 'OS_BRICK_CAS_SIM_STATE'
STATE_FILE = 'state.json'
LOCK_FILE = 'state.lock'
CALLS_FILE = 'calls.jsonl'
SIMULATED_FSID = '5e1dca5e-0000-4000-8000-0000c0ffee00'


def new_state(caches: dict[int, str]) -> dict[str, Any]:
    """A freshly booted host with one running cache instance per entry."""
    return {
        'module_loaded': True,
        'latency_ms': 0,
        'flush_ms_per_block': 0,
        'udev_by_id': False,
        # Open CAS's udev loader try-adds listed cores (cas_standin/udev.py)
        'udev_loader': False,
        # release casadm -V reports (None: releases.DEFAULT_VERSION)
        'version': None,
        # first /dev/rbdN and core id - 1, so two simulated hosts in one
        # test never name the same /dev entry
        'device_offset': 0,
        'opencas_conf': None,
        'rbd_backend': 'file',
        'caches': {str(cache_id): {
            'device': '/dev/nvme0n1p%d' % cache_id,
            'mode': mode, 'status': 'Running', 'size_blocks': 2621440,
            'cores': {}} for cache_id, mode in sorted(caches.items())},
        'images': {},
        'mappings': {},
        'devices': {},
        'created': [],
        # what krbd's sysfs reports as cluster_fsid for every mapping
        'cluster_fsid': SIMULATED_FSID,
        # where the stand-in rbd publishes /sys/bus/rbd/devices/<id>/
        # (None: <state dir>/sysfs)
        'sysfs_root': None,
        'open': [],
        'faults': [],
        'dropped_dirty_blocks': 0,
        # dirty blocks written back to the RBD device by flushes
        'flushed_blocks': 0,
    }


def state_dir(explicit: Optional[str] = None) -> str:
    path = explicit or os.environ.get(ENV)
    if not path:
        raise SystemExit('%s is not set: run "os-brick-cas-simulator init" '
                         'and use the wrappers it writes' % ENV)
    return path


@contextlib.contextmanager
def locked(directory: str) -> Iterator[dict[str, Any]]:
    """Load the state under an exclusive lock and save it on exit."""
    with open(os.path.join(directory, LOCK_FILE), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(directory, STATE_FILE)
        with open(path) as state_file:
            state = json.load(state_file)
        yield state
        temporary = path + '.tmp'
        with open(temporary, 'w') as state_file:
            json.dump(state, state_file, indent=1, sort_keys=True)
        os.replace(temporary, path)


def read(directory: str) -> dict[str, Any]:
    with open(os.path.join(directory, LOCK_FILE), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        with open(os.path.join(directory, STATE_FILE)) as state_file:
            return json.load(state_file)


def write(directory: str, state: dict[str, Any]) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, STATE_FILE)
    with open(path + '.tmp', 'w') as state_file:
        json.dump(state, state_file, indent=1, sort_keys=True)
    os.replace(path + '.tmp', path)


def log_call(directory: str, tool: str, verb: str, argv: list[str],
             exit_code: int) -> None:
    line = json.dumps({'tool': tool, 'verb': verb, 'argv': argv,
                       'exit_code': exit_code, 'time': time.time()})
    with open(os.path.join(directory, CALLS_FILE), 'a') as calls:
        fcntl.flock(calls, fcntl.LOCK_EX)
        calls.write(line + '\n')


def calls(directory: str) -> list[dict[str, Any]]:
    try:
        with open(os.path.join(directory, CALLS_FILE)) as log:
            return [json.loads(line) for line in log if line.strip()]
    except FileNotFoundError:
        return []


class Reply(Exception):
    """Ends a stand-in command with an exit code and its output."""

    def __init__(self, code: int = 0, out: str = '', err: str = ''):
        super().__init__(code)
        self.code, self.out, self.err = code, out, err


def tool_main(tool: str,
              run: Callable[[str, list[str]], tuple[str, Reply]],
              argv: Optional[list[str]] = None) -> int:
    """Run a stand-in: print its reply, log the call, return the code."""
    argv = sys.argv[1:] if argv is None else argv
    directory = state_dir()
    verb, reply = run(directory, argv)
    sys.stdout.write(reply.out)
    sys.stderr.write(reply.err)
    log_call(directory, tool, verb, [tool] + argv, reply.code)
    return reply.code
