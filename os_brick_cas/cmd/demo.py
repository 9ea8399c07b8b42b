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

"""``os-brick-cas demo``: attach and detach a volume per offered cache mode.

The project's main job. It runs the real os_brick_cas code (connector,
policy, casadm layer, privsep entry points) end to end:

* on a host with Open CAS and krbd it uses the real ``casadm``/``rbd`` and
  the volumes named with ``--volume POOL/IMAGE:MODE`` (it writes a test
  pattern only with ``--write-test-pattern``: that destroys data);
* on a machine without them it starts the bundled host simulator in a
  temporary directory and says so loudly: nothing it prints is a property
  of real hardware.
"""

import argparse
import contextlib
from importlib import metadata
import os
import shutil
import tempfile
from typing import Iterator, Optional

import os_brick.privileged
from oslo_config import cfg

from os_brick_cas import casadm
from os_brick_cas import connector as connector_mod
from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas.opencas import known_defects
from os_brick_cas import opts
from os_brick_cas import policy as policy_mod
import os_brick_cas.privileged

CONF = cfg.CONF
#: the simulated host's Open CAS by default: a release with no known
#: data-loss defect, so every mode is offered as on such a real host
SIMULATED_RELEASE = '25.12.2.0000.release'
#: what each mode does with a volume's I/O, as the demo says it
MODE_TEXT = {
    'wt': 'write-through: writes reach Ceph before they are acknowledged; '
          'reads are cached',
    'wb': 'write-back: writes are acknowledged from the cache and reach '
          'Ceph later (dirty data); a detach flushes them first',
    'wa': 'write-around: writes go to Ceph (lines already cached are '
          'updated); reads are cached',
    'wo': 'write-only: writes are cached as in write-back, reads are not; '
          'a detach flushes them first',
    'pt': 'pass-through: every I/O goes straight to Ceph through the '
          'cache instance',
}
SIMULATED_CACHES = {1: 'wt', 2: 'wb', 3: 'wa', 4: 'wo', 5: 'pt'}
#: where the stand-in package registers its simulated host (setup.cfg)
SIMULATED_HOST_GROUP = 'os_brick_cas.simulated_host'
PATTERN = (b'os-brick-cas demo pattern\n' * 158)[:4096]
BANNER = ('SIMULATED HOST: no Open CAS kernel module / krbd here, so casadm '
          'and rbd are the bundled stand-ins (cas_standin). The '
          'os_brick_cas code is real; the host is not.')


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        'demo', help='attach/detach a volume per cache mode (main job)')
    parser.add_argument('--volume', action='append', default=[],
                        metavar='POOL/IMAGE:MODE',
                        help='real host: volume to attach in MODE')
    parser.add_argument('--write-test-pattern', action='store_true',
                        help='real host: write and read back 4 KiB at '
                             'offset 0 (DESTROYS that data)')
    parser.add_argument('--simulate', action='store_true',
                        help='use the simulator even if Open CAS is here')
    parser.add_argument('--simulated-release', default=SIMULATED_RELEASE,
                        metavar='VERSION',
                        help='simulated host: the Open CAS release its '
                             'casadm and loaded module report (default '
                             '%(default)s; 26.03.2.0000.release shows the '
                             'known-defect gate refusing wb and wo)')
    parser.set_defaults(func=run)


def real_open_cas_present() -> bool:
    return bool(shutil.which('casadm') and shutil.which('rbd') and
                os.path.exists('/dev/cas_ctrl'))


def simulated_host_class() -> type:
    """The stand-in's simulated host, found through its entry point.

    The product never imports the stand-in package (cas_standin): it is
    installed beside it and registers itself in SIMULATED_HOST_GROUP.
    """
    for entry_point in metadata.entry_points(group=SIMULATED_HOST_GROUP):
        return entry_point.load()
    raise SystemExit('the demo needs the host simulator and no package '
                     'registers one (entry point group %s): reinstall '
                     'os-brick-cas, which ships it as cas_standin'
                     % SIMULATED_HOST_GROUP)


@contextlib.contextmanager
def simulated_host(release: str = SIMULATED_RELEASE
                   ) -> Iterator[list[tuple[str, str]]]:
    """A simulated host with one cache per mode and one image per mode."""
    if os.geteuid() != 0:
        raise SystemExit('the simulated host creates /dev entries: run the '
                         'demo as root (e.g. sudo tools/demo.sh)')
    workdir = tempfile.mkdtemp(prefix='os-brick-cas-demo-')
    host = simulated_host_class()(caches=SIMULATED_CACHES)
    host.setUp()
    try:
        host.set_version(release)
        # the known-defect gate reads the release as on a real host: from
        # the loaded module's sys/module/cas_cache/version
        CONF.set_override('host_root', host.host_root, group=opts.GROUP)
        conf_path = os.path.join(workdir, 'opencas.conf')
        with open(conf_path, 'w') as conf_file:
            conf_file.write('version=19.3.0\n[caches]\n' + ''.join(
                '%d\t/dev/disk/by-id/nvme-demo-part%d\t%s\n' % (
                    cache_id, cache_id, mode.upper())
                for cache_id, mode in SIMULATED_CACHES.items()) +
                '[cores]\n')
        host.set_opencas_conf(conf_path)
        CONF.set_override('cache_instances', {
            mode: str(cache_id) for cache_id, mode in
            SIMULATED_CACHES.items()}, group=opts.GROUP)
        CONF.set_override('opencas_conf', conf_path, group=opts.GROUP)
        CONF.set_override('lock_path', workdir, group=opts.GROUP)
        CONF.set_override('sysfs_rbd_root', host.sysfs_root,
                          group=opts.GROUP)
        volumes = []
        for mode in SIMULATED_CACHES.values():
            host.create_image('volumes', 'volume-demo-%s' % mode, 16)
            volumes.append(('volumes/volume-demo-%s' % mode, mode))
        yield host, volumes
    finally:
        host.cleanUp()
        shutil.rmtree(workdir, ignore_errors=True)


def _write_and_verify(path: str) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, PATTERN, 0)
        os.fsync(fd)
        if os.pread(fd, len(PATTERN), 0) != PATTERN:
            raise RuntimeError('read back from %s differs' % path)
    finally:
        os.close(fd)


def _props(name: str, mode: str) -> dict:
    return {'name': name, 'volume_id': name.split('/')[1],
            'cacheable': True, 'cache_mode': mode, 'hosts': [],
            'ports': [], 'auth_username': None}


def _print_list(cas: casadm.Casadm) -> None:
    for cache in cas.list_caches():
        print('  cache %d  %-3s %-11s cores: %s' % (
            cache.cache_id, cache.mode, cache.status,
            ', '.join('%s -> %s' % (c.exported or '-', c.device)
                      for c in cache.cores) or '-'))


def run(args: argparse.Namespace) -> int:
    simulate = args.simulate or not real_open_cas_present()
    if simulate:
        print('=' * 78)
        print(BANNER)
        print('=' * 78)
        for context in (os_brick_cas.privileged.default,
                        os_brick_cas.privileged.flush,
                        os_brick.privileged.default):
            context.set_client_mode(False)
    elif not args.volume:
        print('Open CAS found. Name volumes to try with --volume '
              'POOL/IMAGE:MODE (e.g. volumes/volume-1234:wt).')
        return 2
    with (simulated_host(args.simulated_release) if simulate
          else _real_host(args)) as (
            host, volumes):
        return _exercise(host, volumes,
                         write=simulate or args.write_test_pattern)


@contextlib.contextmanager
def _real_host(args: argparse.Namespace):
    volumes = []
    for spec in args.volume:
        name, _, mode = spec.rpartition(':')
        volumes.append((name, modes.CacheMode(mode).value))
    yield None, volumes


def _exercise(host, volumes: list[tuple[str, str]], write: bool) -> int:
    connector = connector_mod.CachedRBDConnector(None)
    cas = connector.volume_cache.casadm
    unsafe = policy_mod.CachePolicy.from_conf(CONF).unsafe_modes
    print('Open CAS %s loaded: %s' % (
        known_defects.loaded_version(CONF) or '(version unknown)',
        'modes %s not offered (known data-loss defect)' % ', '.join(
            sorted(mode.value for mode in unsafe)) if unsafe else
        'no known data-loss defect, every mode offered'))
    attached = []
    failures = 0
    try:
        for name, mode in volumes:
            props = _props(name, mode)
            print('%s: %s' % (mode, MODE_TEXT[mode]))
            if modes.CacheMode(mode) in unsafe:
                failures += _expect_refusal(connector, props,
                                            unsafe[modes.CacheMode(mode)])
                continue
            info = connector.connect_volume(props)
            attached.append((props, info))
            print('attached %-28s mode %s -> %s' % (name, mode,
                                                    info['path']))
            if write:
                _write_and_verify(info['path'])
                print('  wrote and read back 4 KiB through %s'
                      % info['path'])
            if host is not None and modes.CacheMode(mode).holds_dirty_data:
                core = cas.find_core(cas.list_caches(),
                                     host.by_id_link(*name.split('/')))
                host.set_dirty(core.cache_id, core.core_id, 64)
                print('  simulated 64 dirty blocks (not yet in Ceph)')
        print('host state (casadm -L):')
        _print_list(cas)
    except Exception as exc:
        failures += 1
        print('FAILED: %s' % exc)
    for props, info in reversed(attached):
        try:
            connector.disconnect_volume(props, info)
            flushed = modes.CacheMode(props['cache_mode']).holds_dirty_data
            print('detached %s%s' % (props['name'], ' (flushed to Ceph '
                                     'first)' if flushed else ''))
        except Exception as exc:
            failures += 1
            print('FAILED to detach %s: %s' % (props['name'], exc))
    leftover = [c for cache in cas.list_caches() for c in cache.cores]
    if leftover:
        failures += 1
        print('FAILED: cores left behind: %s' % leftover)
    print('demo %s (%d volumes, %s host)' % (
        'FAILED' if failures else 'passed', len(volumes),
        'SIMULATED' if host is not None else 'real'))
    return 1 if failures else 0


def _expect_refusal(connector: connector_mod.CachedRBDConnector,
                    props: dict, reason: exception.CasError) -> int:
    """Attach a volume in a mode the gate withholds: 1 unless refused."""
    try:
        info = connector.connect_volume(props)
    except exception.CasError:
        found = getattr(reason, 'kwargs', {})
        print('  %s not attached, as on a real host with this release: %s'
              % (props['name'], 'Open CAS %s has known defect %s, which can '
                 'lose acknowledged %s writes' % (
                     found['version'], found['defect'], props['cache_mode'])
                 if {'version', 'defect'} <= set(found) else
                 str(reason).split(' (')[0]))
        return 0
    print('FAILED: %s attached in mode %s, which the known-defect gate '
          'withholds' % (props['name'], props['cache_mode']))
    connector.disconnect_volume(props, info)
    return 1


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog='os-brick-cas demo')
    sub = parser.add_subparsers(dest='command', required=True)
    add_parser(sub)
    args = parser.parse_args(['demo'] + list(argv or []))
    return args.func(args)
