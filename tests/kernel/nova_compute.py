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

"""nova-compute's volume calls against a real libvirtd, in its own process.

tests/kernel/test_libvirt.py starts this module (``python -m
tests.kernel.nova_compute``) once per test module, before libvirtd (its
imports run while libvirtd starts): nova's option and object
registries would collide with the other kernel tests', and nova's libvirt
event threads are not daemon threads, so it ends with ``os._exit``. The
first line on stdin, read once nova is imported, is the set-up (JSON)::

    {"os_brick_cas": {...}, "lock_path": "...", "instance_uuid": "..."}

then one request per line, ``{"op": "attach" | "detach" | "exit",
"connection_info": {...}, "mountpoint": "/dev/vdb"}`` or ``{"op":
"libvirt-options", "options": {...}}`` (``[libvirt]`` overrides). Each
answer is one line ``NOVA-COMPUTE {"ok": bool, "seconds": float, "error": str,
"message": str, "qemu_held_at_disconnect": [...]}``.

What runs is nova's own ``LibvirtDriver.attach_volume`` /
``detach_volume`` through the product's CachedRBDLibvirtDriver
(``init_host`` included) with the real connector in-process as root;
only the database calls an attach makes (``Instance.save`` and the device
metadata it rebuilds) do nothing here, as there is no database.
"""

import glob
import json
import logging
import os
import sys
import time
import traceback
from typing import Any

PREFIX = 'NOVA-COMPUTE '


def qemu_cas_descriptors() -> list[str]:
    """/dev/cas* devices any running QEMU holds open (from /proc)."""
    held = []
    for pid_file in glob.glob('/run/libvirt/qemu/*.pid'):
        try:
            with open(pid_file) as pid_text:
                pid = int(pid_text.read().strip())
            fd_dir = '/proc/%d/fd' % pid
            for fd in os.listdir(fd_dir):
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.startswith('/dev/cas'):
                    held.append(target)
        except (OSError, ValueError):
            continue
    return sorted(held)


def configure(setup: dict[str, Any]) -> None:
    import nova.conf
    from nova_ext import opts as nova_ext_opts
    from os_brick_cas import opts as host_opts

    conf = nova.conf.CONF
    conf([], project='nova', default_config_files=[])
    conf.set_override('host', 'kernel-guest-compute')
    conf.set_override('my_ip', '127.0.0.1')
    conf.set_override('lock_path', setup['lock_path'],
                      group='oslo_concurrency')
    conf.set_override('virt_type', 'qemu', group='libvirt')
    conf.set_override('connection_uri', 'qemu:///system', group='libvirt')
    for name, value in setup.get('libvirt', {}).items():
        conf.set_override(name, value, group='libvirt')
    for name, value in setup['os_brick_cas'].items():
        conf.set_override(name, value, group=host_opts.GROUP)
    conf.set_override('enabled', True, group=nova_ext_opts.GROUP)
    # the fence marker needs the Cinder API (tests/nova covers it)
    conf.set_override('use_fence_marker', False, group=nova_ext_opts.GROUP)


class Compute:
    """The product's nova driver started against the guest's libvirtd."""

    def __init__(self, setup: dict[str, Any]) -> None:
        from nova import context as nova_context
        from nova import objects
        from nova.virt import fake as fake_virt
        from nova.virt.libvirt import driver as libvirt_driver

        from nova_ext import driver as nova_ext_driver
        from nova_ext import volume as cached_volume
        from os_brick_cas.cmd import commands as cas_cmd

        configure(setup)
        objects.register_all()
        cas_cmd.run_privileged_in_process_as_root()
        # no database here: what an attach writes there is not kept
        objects.Instance.save = lambda self, *args, **kwargs: None
        libvirt_driver.LibvirtDriver._build_device_metadata = (
            lambda self, context, instance: None)
        # observation only: which /dev/cas* QEMU still holds when nova
        # hands the volume to the product's disconnect
        self.held_at_disconnect: list[list[str]] = []
        disconnect = cached_volume.LibvirtCachedRBDVolumeDriver.\
            disconnect_volume

        def observed(driver, *args, **kwargs):
            self.held_at_disconnect.append(qemu_cas_descriptors())
            return disconnect(driver, *args, **kwargs)

        cached_volume.LibvirtCachedRBDVolumeDriver.disconnect_volume = (
            observed)
        self.context = nova_context.get_admin_context()
        self.driver = nova_ext_driver.CachedRBDLibvirtDriver(
            fake_virt.FakeVirtAPI(), False)
        self.driver.init_host('kernel-guest-compute')
        flavor = objects.Flavor(
            id=1, name='m1.tiny', memory_mb=128, vcpus=1, root_gb=0,
            ephemeral_gb=0, swap=0, extra_specs={}, flavorid='1',
            rxtx_factor=1.0, vcpu_weight=None, disabled=False,
            is_public=True)
        self.instance = objects.Instance(
            context=self.context, id=1, uuid=setup['instance_uuid'],
            flavor=flavor, system_metadata={}, image_ref='',
            host='kernel-guest-compute', vm_state='active',
            task_state=None, project_id='p', user_id='u',
            instance_type_id=1, root_device_name='/dev/vda')

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        self.held_at_disconnect.clear()
        started = time.monotonic()
        answer: dict[str, Any] = {'ok': True}
        try:
            if request['op'] == 'attach':
                self.driver.attach_volume(
                    self.context, request['connection_info'],
                    self.instance, request['mountpoint'])
            elif request['op'] == 'detach':
                self.driver.detach_volume(
                    self.context, request['connection_info'],
                    self.instance, request['mountpoint'])
            elif request['op'] == 'libvirt-options':
                import nova.conf
                for name, value in request['options'].items():
                    nova.conf.CONF.set_override(name, value, group='libvirt')
            else:
                raise ValueError('unknown op %r' % request['op'])
        except Exception as exc:
            answer.update(ok=False, error=type(exc).__name__,
                          message=str(exc),
                          trace=traceback.format_exc())
        answer.update(seconds=time.monotonic() - started,
                      qemu_held_at_disconnect=list(self.held_at_disconnect),
                      disconnect_called=bool(self.held_at_disconnect))
        return answer


def reply(answer: dict[str, Any]) -> None:
    sys.stdout.write(PREFIX + json.dumps(answer) + '\n')
    sys.stdout.flush()


def preload() -> None:
    """Import nova and the product before the set-up line arrives.

    Under TCG the imports take minutes; the test starts libvirtd meanwhile.
    """
    import nova.virt.fake  # noqa: F401
    import nova.virt.libvirt.driver  # noqa: F401

    import nova_ext.driver  # noqa: F401
    import os_brick_cas.cmd.commands  # noqa: F401


def main() -> None:
    # nova's and the product's log lines go to stderr (the test's log file)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format='%(asctime)s %(levelname)s %(name)s '
                               '%(message)s')
    try:
        started = time.monotonic()
        preload()
        imported = time.monotonic() - started
        setup = json.loads(sys.stdin.readline())
        started = time.monotonic()
        compute = Compute(setup)
        reply({'ok': True, 'imports': imported,
               'seconds': time.monotonic() - started})
        for line in sys.stdin:
            request = json.loads(line)
            if request['op'] == 'exit':
                break
            reply(compute.handle(request))
    except Exception as exc:
        reply({'ok': False, 'error': type(exc).__name__,
               'message': str(exc), 'trace': traceback.format_exc()})
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # nova's libvirt event threads are not daemon threads
        os._exit(0)


if __name__ == '__main__':
    main()
