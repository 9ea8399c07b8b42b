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

"""nova_ext's volume driver on the real-Ceph tier, in its own process.

nova and cinder cannot share one Python process (their option and object
registries collide), so the cinder-side test runs this module with the
connection_info cinder_ext returned, on stdin as JSON::

    {"connection_info": {...}, "host_options": {...},
     "write": {"offset": N, "length": N, "label": "..."} or null}

It does what nova-compute does for a volume attach on the simulated host
whose ``rbd map`` maps the real image: CachedRBDLibvirtDriver picks the
volume driver, which runs connect_volume and get_config (the guest disk
XML nova hands to libvirt), then -- as the guest would --
writes the pattern with O_DIRECT to the <source dev> of that XML, reads it
back, and disconnects. libvirt itself is nova's in-tree fake (only
find_secret is reached). Prints JSON: the XML, the path written, what was
read back (hex), and the connection_info after the attach, on the last
line of stdout after RESULT_PREFIX.
"""

import json
import sys
from typing import Any
from xml.etree import ElementTree

DISK_INFO = {'dev': 'vdb', 'bus': 'virtio', 'type': 'disk'}
RESULT_PREFIX = 'NOVA-ATTACH-RESULT '


def _configure(host_options: dict[str, Any]) -> None:
    import nova.conf
    from nova_ext import opts as nova_ext_opts
    from os_brick_cas import opts as host_opts

    conf = nova.conf.CONF
    conf([], project='nova', default_config_files=[])
    conf.set_override('host', 'ceph-tier-compute')
    for name, value in host_options.items():
        conf.set_override(name, value, group=host_opts.GROUP)
    conf.set_override('enabled', True, group=nova_ext_opts.GROUP)
    # the fence marker needs the Cinder API; tests/nova covers it
    conf.set_override('use_fence_marker', False, group=nova_ext_opts.GROUP)


def attach_write_detach(request: dict[str, Any]) -> dict[str, Any]:
    """Attach through nova_ext, write as a guest would, detach."""
    from nova.tests.fixtures import libvirt as fakelibvirt
    from nova.virt import fake as fake_virt

    from nova_ext import driver as nova_ext_driver
    from os_brick_cas.cmd import commands as cas_cmd
    from tests.ceph import blockio

    _configure(request['host_options'])
    # the tier runs as root: privsep entry points run in this process
    cas_cmd.run_privileged_in_process_as_root()
    fixture = fakelibvirt.LibvirtFixture()
    fixture.setUp()
    try:
        compute_driver = nova_ext_driver.CachedRBDLibvirtDriver(
            fake_virt.FakeVirtAPI(), False)
        connection_info = request['connection_info']
        # the volume driver nova picks for this connection_info
        driver = compute_driver._get_volume_driver(connection_info)
        driver.connect_volume(connection_info, None)
        xml = driver.get_config(connection_info, dict(DISK_INFO)).to_xml()
        result = {'xml': xml, 'connection_info': connection_info,
                  'volume_driver': type(driver).__name__,
                  'path': None, 'read_back': None}
        source = ElementTree.fromstring(xml).find('source')
        write = request.get('write')
        if write and source is not None and source.get('dev'):
            path = source.get('dev')
            payload = blockio.pattern(write['label'], write['length'])
            blockio.write_direct(path, write['offset'], payload)
            result.update(path=path, read_back=blockio.read_direct(
                path, write['offset'], write['length']).hex())
        driver.disconnect_volume(connection_info, None)
        return result
    finally:
        fixture.cleanUp()


def main() -> int:
    result = attach_write_detach(json.load(sys.stdin))
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
