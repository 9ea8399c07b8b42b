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

"""A real libvirtd and a paused TCG domain as the compute host's hypervisor.

Debian 12's monolithic libvirtd runs without systemd here: QEMU as root,
no security driver, no virtlogd (``stdio_handler = "file"``: the domain's
log is /var/log/libvirt/qemu/DOM.log). It must find the user
``libvirt-qemu`` even so. In the real-kernel guest /etc is a writable
overlay, so the files are written where libvirtd reads them.

IO without a guest kernel goes through QEMU's monitor (HMP ``qemu-io`` on
the disk's virtio backend); its verdict is written to the domain's log.
"""

import os
import re
import shutil
import subprocess
import time
from typing import Optional
from xml.etree import ElementTree

URI = 'qemu:///system'
QEMU_LOG_DIR = '/var/log/libvirt/qemu'
QEMU_RUN_DIR = '/run/libvirt/qemu'
#: libvirt's probe of QEMU's capabilities (22-34 s in the TCG guest at
#: the first start): kept between runs when a cache directory is given
CAPS_CACHE = '/var/cache/libvirt/qemu/capabilities'
O_DIRECT = 0o40000
QEMU_CONF = '''user = "root"
group = "root"
security_driver = "none"
stdio_handler = "file"
'''
#: nova's instance_name_template for id 1 (nova finds the domain by name)
DOMAIN = 'instance-00000001'
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
DOMAIN_XML = '''<domain type='qemu' xmlns:qemu='%(qemu_ns)s'>
  <name>%(name)s</name>
  <uuid>%(uuid)s</uuid>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='pci' model='pcie-root'/>
    %(ports)s
    <memballoon model='none'/>
  </devices>
  %(commandline)s
</domain>
'''
#: native PCIe hot-plug: a paused guest's unplug completes at once (q35's
#: default, ACPI hot-plug, waits for the guest to acknowledge it)
NATIVE_HOTPLUG = '''<qemu:commandline>
    <qemu:arg value='-global'/>
    <qemu:arg value='ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off'/>
  </qemu:commandline>'''


def run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True,
                          timeout=timeout)


def virsh(*args: str, timeout: float = 120) -> str:
    done = run('virsh', '-c', URI, *args, timeout=timeout)
    if done.returncode:
        raise RuntimeError('virsh %s failed (%d): %s%s' % (
            ' '.join(args), done.returncode, done.stdout, done.stderr))
    return done.stdout


def _ensure_account(path: str, name: str, line: str) -> None:
    with open(path) as accounts:
        if any(row.split(':', 1)[0] == name for row in accounts):
            return
    with open(path, 'a') as accounts:
        accounts.write(line + '\n')


class Libvirtd:
    """libvirtd started in the foreground; stop() ends it and its QEMUs."""

    def __init__(self, log_path: str,
                 caps_cache: Optional[str] = None) -> None:
        self.log_path = log_path
        self.caps_cache = caps_cache
        self.process: Optional[subprocess.Popen] = None
        self.start_seconds = 0.0
        self.caps_cached = False

    def start(self, timeout: float = 180) -> None:
        _ensure_account('/etc/group', 'libvirt-qemu',
                        'libvirt-qemu:x:64055:')
        _ensure_account('/etc/passwd', 'libvirt-qemu',
                        'libvirt-qemu:x:64055:64055:Libvirt Qemu:'
                        '/var/lib/libvirt:/usr/sbin/nologin')
        os.makedirs('/etc/libvirt', exist_ok=True)
        with open('/etc/libvirt/qemu.conf', 'w') as conf:
            conf.write(QEMU_CONF)
        for directory in (QEMU_LOG_DIR, CAPS_CACHE):
            os.makedirs(directory, exist_ok=True)
        if self.caps_cache and os.path.isdir(self.caps_cache):
            for name in os.listdir(self.caps_cache):
                shutil.copy2(os.path.join(self.caps_cache, name), CAPS_CACHE)
                self.caps_cached = True
        started = time.monotonic()
        log = open(self.log_path, 'a')
        self.process = subprocess.Popen(
            ['libvirtd'],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError('libvirtd exited (%d); see %s' % (
                    self.process.returncode, self.log_path))
            # the first call waits for the capabilities probe of every
            # emulator (x86_64 and i386, as nova's init_host asks for the
            # host's capabilities): all of them reach the cache below
            if not run('virsh', '-c', URI, 'capabilities',
                       timeout=timeout).returncode:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError('libvirtd did not answer within %d s' %
                               timeout)
        self.start_seconds = time.monotonic() - started
        if self.caps_cache:
            os.makedirs(self.caps_cache, exist_ok=True)
            for name in os.listdir(CAPS_CACHE):
                shutil.copy2(os.path.join(CAPS_CACHE, name), self.caps_cache)

    def stop(self) -> None:
        """Power off and undefine every domain, then end libvirtd."""
        listed = run('virsh', '-c', URI, 'list', '--all', '--name')
        for name in listed.stdout.split():
            run('virsh', '-c', URI, 'destroy', name)
            run('virsh', '-c', URI, 'undefine', name)
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Domain:
    """A persistent q35 TCG domain, started paused (it costs no CPU)."""

    def __init__(self, uuid: str, name: str = DOMAIN,
                 native_hotplug: bool = True, ports: int = 4) -> None:
        self.name = name
        self.uuid = uuid
        self.native_hotplug = native_hotplug
        self.ports = ports

    def xml(self) -> str:
        ports = '\n    '.join(
            "<controller type='pci' model='pcie-root-port'/>"
            for _ in range(self.ports))
        return DOMAIN_XML % {
            'qemu_ns': QEMU_NS, 'name': self.name, 'uuid': self.uuid,
            'ports': ports,
            'commandline': NATIVE_HOTPLUG if self.native_hotplug else ''}

    @property
    def log_path(self) -> str:
        return os.path.join(QEMU_LOG_DIR, self.name + '.log')

    def define_and_start(self, directory: str) -> None:
        path = os.path.join(directory, self.name + '.xml')
        with open(path, 'w') as xml_file:
            xml_file.write(self.xml())
        virsh('define', path)
        virsh('start', '--paused', self.name)

    def start(self) -> None:
        virsh('start', '--paused', self.name)

    def destroy(self) -> None:
        """Power off: QEMU exits and closes every device it held."""
        virsh('destroy', self.name)

    def remove(self) -> None:
        run('virsh', '-c', URI, 'destroy', self.name)
        run('virsh', '-c', URI, 'undefine', self.name)

    def live_xml(self) -> ElementTree.Element:
        return ElementTree.fromstring(virsh('dumpxml', self.name))

    def disk(self, target: str) -> Optional[ElementTree.Element]:
        for disk in self.live_xml().findall('./devices/disk'):
            found = disk.find('target')
            if found is not None and found.get('dev') == target:
                return disk
        return None

    def qemu_pid(self) -> Optional[int]:
        try:
            with open(os.path.join(QEMU_RUN_DIR, self.name + '.pid')) as pid:
                return int(pid.read().strip())
        except (OSError, ValueError):
            return None

    def open_flags(self, device: str) -> list[int]:
        """fdinfo flags of each descriptor QEMU holds on *device*."""
        pid = self.qemu_pid()
        if pid is None:
            return []
        flags = []
        fd_dir = '/proc/%d/fd' % pid
        try:
            descriptors = os.listdir(fd_dir)
        except FileNotFoundError:
            return []
        for fd in descriptors:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) != device:
                    continue
                with open('/proc/%d/fdinfo/%s' % (pid, fd)) as info:
                    flags.append(int(re.search(r'^flags:\s*(\d+)',
                                               info.read(), re.M).group(1),
                                     8))
            except (FileNotFoundError, AttributeError):
                continue
        return flags

    def qemu_io(self, target: str, command: str,
                timeout: float = 120) -> str:
        """Run qemu-io on the disk *target*; its report from the log.

        Returns the report's lines (qemu-io writes them to the domain's
        log, not to the monitor); waits until qemu-io's summary or error
        line has appeared.
        """
        disk = self.disk(target)
        if disk is None:
            raise RuntimeError('no disk %s in %s' % (target, self.name))
        alias = disk.find('alias').get('name')
        with open(self.log_path, 'rb') as log:
            log.seek(0, os.SEEK_END)
            start = log.tell()
        virsh('qemu-monitor-command', '--hmp', self.name,
              'qemu-io -d /machine/peripheral/%s/virtio-backend "%s"' % (
                  alias, command))
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, 'rb') as log:
                log.seek(start)
                report = log.read().decode(errors='replace')
            if re.search(r'^(wrote|read|discard) \d+/\d+ bytes|'
                         r'(failed|error|Error)', report, re.M):
                # qemu-io prints its timing line right after the summary
                time.sleep(0.2)
                with open(self.log_path, 'rb') as log:
                    log.seek(start)
                    return log.read().decode(errors='replace')
            if time.monotonic() > deadline:
                raise RuntimeError('qemu-io %r gave no report in %d s: %r'
                                   % (command, timeout, report))
            time.sleep(0.2)
