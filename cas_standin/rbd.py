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

"""Stand-in ``rbd`` (Ceph 16 CLI) for the commands krbd attach uses.

``map`` allocates /dev/rbdN, publishes what krbd publishes under
/sys/bus/rbd/devices/N/ (in the host's ``sysfs`` directory: pool, pool_ns,
name, snap, current_snap, image_id, cluster_fsid) and makes the links udev
would make (/dev/rbd/<pool>/[<namespace>/]<image>, and the os-brick-cas
by-id link when the host has the os-brick-cas udev rule). With the "file"
backend /dev/rbdN is a sparse file; with the "ceph" backend it is a block
node aliasing a loop device over the real image
(:mod:`cas_standin.rbd_ceph`).
"""

import functools
import hashlib
import json
import os
import shutil
import sys
import time
from typing import Any, Optional

from cas_standin import casadm
from cas_standin import devices
from cas_standin import faults
from cas_standin import state as state_mod
from cas_standin import udev
from os_brick_cas import rbd_names

# options that take a value and are accepted (and ignored) like the real CLI
_IGNORED_VALUE_OPTS = {'--id', '--user', '--mon_host', '-m', '--conf', '-c',
                       '--keyring', '--cluster', '--name', '-n',
                       '--options', '-o'}

#: the reply type every command ends with
Reply = state_mod.Reply


def parse(argv: list[str]) -> tuple[str, list[str], dict[str, str]]:
    positional: list[str] = []
    opts: dict[str, str] = {}
    tokens = list(argv)
    while tokens:
        token = tokens.pop(0)
        if token in _IGNORED_VALUE_OPTS or token in ('--pool', '-p',
                                                     '--size', '-s',
                                                     '--format',
                                                     '--namespace'):
            opts[token.lstrip('-')] = tokens.pop(0) if tokens else ''
        elif token.startswith('--format='):
            opts['format'] = token.split('=', 1)[1]
        elif token.startswith('-'):
            opts[token.lstrip('-')] = ''
        else:
            positional.append(token)
    if positional and positional[0] == 'device':
        positional.pop(0)
    if not positional:
        raise Reply(1, '', 'rbd: missing command\n')
    return positional[0], positional[1:], opts


def _spec(args: list[str], opts: dict[str, str]) -> tuple[str, str]:
    """(pool, image key) where the key is ``[namespace/]image``."""
    if not args:
        raise Reply(22, '', 'rbd: image name was not specified\n')
    parts = args[0].split('/')
    if len(parts) > 3:
        raise Reply(22, '', 'rbd: invalid image spec %s\n' % args[0])
    pool = parts[0] if len(parts) > 1 else (
        opts.get('pool') or opts.get('p') or 'rbd')
    namespace = parts[1] if len(parts) == 3 else opts.get('namespace', '')
    image = parts[-1]
    return pool, '%s/%s' % (namespace, image) if namespace else image


def split_key(key: str) -> tuple[str, str, str]:
    """(pool, namespace, image) of an image key ``pool/[ns/]image``."""
    parts = key.split('/')
    return parts[0], parts[1] if len(parts) == 3 else '', parts[-1]


def sysfs_root(state_dir: str, state: dict[str, Any]) -> str:
    return state.get('sysfs_root') or os.path.join(state_dir, 'sysfs')


def _publish_sysfs(state_dir: str, state: dict[str, Any], number: str,
                   key: str) -> None:
    """Write krbd's attributes of device *number* (as the kernel would)."""
    pool, namespace, image = split_key(key)
    directory = os.path.join(sysfs_root(state_dir, state), number)
    os.makedirs(directory, exist_ok=True)
    image_id = hashlib.sha1(key.encode()).hexdigest()[:12]
    for name, value in (('pool', pool), ('pool_ns', namespace),
                        ('name', image), ('snap', '-'),
                        ('current_snap', '-'), ('image_id', image_id),
                        ('cluster_fsid', state['cluster_fsid'])):
        with open(os.path.join(directory, name), 'w') as attribute:
            attribute.write(value + '\n')


def remove_sysfs(state_dir: str, state: dict[str, Any], number: str) -> None:
    shutil.rmtree(os.path.join(sysfs_root(state_dir, state), number),
                  ignore_errors=True)


def udev_link(state: dict[str, Any], key: str) -> str:
    """The by-id link the os-brick-cas udev rule makes for image *key*."""
    pool, namespace, image = split_key(key)
    spec = rbd_names.ImageSpec(pool, namespace, image,
                               rbd_names.normal_fsid(state['cluster_fsid']))
    return '%s/%s' % (devices.BY_ID, spec.link_name())


def _size_bytes(raw: str) -> int:
    units = {'K': 2 ** 10, 'M': 2 ** 20, 'G': 2 ** 30}
    if raw and raw[-1].upper() in units:
        return int(raw[:-1]) * units[raw[-1].upper()]
    return int(raw) * 2 ** 20


def _backend(state: dict[str, Any]):
    if state['rbd_backend'] == 'ceph':
        from cas_standin import rbd_ceph
        return rbd_ceph
    return None


def create(state_dir: str, state: dict[str, Any], args: list[str],
           opts: dict[str, str]) -> Reply:
    pool, image = _spec(args, opts)
    key = '%s/%s' % (pool, image)
    if key in state['images']:
        raise Reply(17, '', 'rbd: create error: (17) File exists\n')
    state['images'][key] = _size_bytes(opts.get('size') or opts.get('s')
                                       or '16')
    return Reply(0)


def map_image(state_dir: str, state: dict[str, Any], args: list[str],
              opts: dict[str, str]) -> Reply:
    pool, image = _spec(args, opts)
    key = '%s/%s' % (pool, image)
    backend = _backend(state)
    exists = (backend.image_exists(state_dir, pool, image) if backend
              else key in state['images'])
    if not exists:
        raise Reply(2, '', 'rbd: sysfs write failed\nrbd: map failed: (2) '
                           'No such file or directory\n')
    err = ''
    for device in state['mappings'].values():
        if device['image'] == key:
            err = 'rbd: warning: image already mapped as %s\n' % (
                device['device'])
    number = state.get('device_offset', 0)
    while str(number) in state['mappings']:
        number += 1
    node = '/dev/rbd%d' % number
    if backend:
        loop = backend.map_image(state_dir, pool, image)
        devices.block_node(state, node, loop)
        state['devices'][node] = os.stat(loop).st_size or _loop_size(loop)
    else:
        devices.sparse_file(state, node, state['images'][key])
        state['devices'][node] = state['images'][key]
        loop = None
    state['mappings'][str(number)] = {'image': key, 'device': node,
                                      'loop': loop}
    _publish_sysfs(state_dir, state, str(number), key)
    devices.symlink(state, '/dev/rbd/%s/%s' % (pool, image), node)
    if state['udev_by_id']:
        devices.symlink(state, udev_link(state, key), node)
    udev.loader_pass(state, functools.partial(casadm.activate_inactive,
                                              state_dir=state_dir))
    return Reply(0, node + '\n', err)


def _loop_size(loop: str) -> int:
    with open(loop, 'rb') as device:
        return device.seek(0, os.SEEK_END)


def unmap(state_dir: str, state: dict[str, Any], args: list[str],
          opts: dict[str, str]) -> Reply:
    if not args:
        raise Reply(22, '', 'rbd: unmap requires either image name or '
                            'device path\n')
    target = args[0]
    for number, mapping in sorted(state['mappings'].items()):
        if target in (mapping['device'], mapping['image']) or (
                not target.startswith('/dev/') and
                mapping['image'] == '%s/%s' % _spec(args, opts)):
            break
    else:
        raise Reply(22, '', 'rbd: %s: not a mapped image or snapshot\n'
                    % target)
    node = mapping['device']
    forced = 'force' in (opts.get('o', '') + ',' + opts.get('options', '')
                         ).split(',')
    holder = _holder(state, node)
    if holder and not forced:
        # krbd: the device is open (an Open CAS core, a guest) -> EBUSY
        raise Reply(16, '', 'rbd: sysfs write failed\nrbd: unmap failed: '
                            '(16) Device or resource busy\n')
    pool, image = mapping['image'].split('/', 1)
    del state['mappings'][number]
    remove_sysfs(state_dir, state, number)
    backend = _backend(state)
    if backend and mapping.get('loop'):
        backend.unmap_image(state_dir, pool, image, mapping['loop'])
    # forced: a core holding it stays Active on a dead device (its flushes
    # and cleaning fail with I/O errors)
    state['devices'].pop(node, None)
    devices.remove(state, node)
    for link in ('/dev/rbd/%s/%s' % (pool, image),
                 udev_link(state, mapping['image'])):
        if os.path.islink(link) and os.path.realpath(link) == node:
            if link.startswith('/dev/rbd/') or state['udev_by_id']:
                devices.remove(state, link)
    return Reply(0)


def _holder(state: dict[str, Any], node: str) -> bool:
    """Whether *node* is open: an active core or a recorded opener."""
    if node in state['open']:
        return True
    return any(core['status'] != 'Inactive' and core.get('resolved') == node
               for cache in state['caches'].values()
               for core in cache['cores'].values())


def showmapped(state_dir: str, state: dict[str, Any], args: list[str],
               opts: dict[str, str]) -> Reply:
    rows = []
    for number, mapping in sorted(state['mappings'].items(),
                                  key=lambda item: int(item[0])):
        pool, namespace, image = split_key(mapping['image'])
        rows.append({'id': number, 'pool': pool, 'namespace': namespace,
                     'name': image, 'snap': '-',
                     'device': mapping['device']})
    if opts.get('format') == 'json':
        return Reply(0, json.dumps(rows) + '\n')
    lines = ['id  pool  namespace  image  snap  device']
    lines += ['%(id)s  %(pool)s    %(name)s  %(snap)s  %(device)s' % row
              for row in rows]
    return Reply(0, '\n'.join(lines) + '\n')


def list_images(state_dir: str, state: dict[str, Any], args: list[str],
                opts: dict[str, str]) -> Reply:
    pool = args[0] if args else opts.get('pool') or opts.get('p') or 'rbd'
    names = sorted(key.split('/', 1)[1] for key in state['images']
                   if key.split('/', 1)[0] == pool)
    return Reply(0, ''.join(name + '\n' for name in names))


def remove_image(state_dir: str, state: dict[str, Any], args: list[str],
                 opts: dict[str, str]) -> Reply:
    pool, image = _spec(args, opts)
    key = '%s/%s' % (pool, image)
    if any(m['image'] == key for m in state['mappings'].values()):
        raise Reply(16, '', 'rbd: error: image still has watchers\n')
    if state['images'].pop(key, None) is None:
        raise Reply(2, '', 'rbd: delete error: (2) No such file or '
                           'directory\n')
    return Reply(0, 'Removing image: 100% complete...done.\n')


COMMANDS = {'map': map_image, 'unmap': unmap, 'showmapped': showmapped,
            'list': showmapped, 'create': create, 'ls': list_images,
            'rm': remove_image}


def run(state_dir: str, argv: list[str]) -> tuple[str, Reply]:
    verb = 'unknown'
    try:
        verb, args, opts = parse(argv)
        if verb == 'list' and argv[:1] != ['device']:
            verb = 'ls'
        if verb not in COMMANDS:
            raise Reply(22, '', 'rbd: error parsing command %r\n' % verb)
        with state_mod.locked(state_dir) as state:
            fault = faults.take(state, verb)
            latency = state['latency_ms'] / 1000.0
        if fault is not None:
            return verb, Reply(faults.play(fault))
        if latency:
            time.sleep(latency)
        with state_mod.locked(state_dir) as state:
            return verb, COMMANDS[verb](state_dir, state, args, opts)
    except Reply as reply:
        return verb, reply
    except KeyboardInterrupt:
        return verb, Reply(2, '', 'rbd: interrupted\n')


def main(argv: Optional[list[str]] = None) -> int:
    return state_mod.tool_main('rbd', run, argv)


if __name__ == '__main__':
    sys.exit(main())
