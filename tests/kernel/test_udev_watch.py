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

"""udev reads no attached /dev/casX-Y after a writer closes it.

Open CAS's own 60-persistent-storage-cas.rules puts an inotify watch on
every cas* device: when a process that opened it for writing closes it,
udev runs a change event whose blkid probe reads the device through the
page cache, a buffered reader racing whatever the guest writes next (issue
22). The product's rule turns the watch off (OPTIONS:="nowatch"). Measured
here by the device's own read counter (/sys/block/casX-Y/stat), with the
product's rule as installed, then with its nowatch line taken out (the
control: the same close must then make udev read).
"""

import os
import time

from tests.kernel import base

#: where tools/kernel/guest.sh and the Ansible role install the rule
INSTALLED_RULE = '/etc/udev/rules.d/60-os-brick-cas-rbd.rules'
#: udevd handles the inotify event some time after the close
INOTIFY_GRACE = 3


def reads_completed(device: str) -> int:
    """Reads the block device completed (field 1 of its sysfs stat)."""
    name = os.path.basename(os.path.realpath(device))
    with open('/sys/class/block/%s/stat' % name) as stat:
        return int(stat.read().split()[0])


class UdevWatchTestCase(base.KernelTestCase):

    caches = {2: 'wb'}

    def reads_after_a_write_close(self, device: str) -> int:
        """Device reads udev makes after an open for writing is closed."""
        base.run('udevadm', 'settle', '-t', '30')
        # a probe finds the page cache empty, as after a guest's writes
        base.run('blockdev', '--flushbufs', device)
        before = reads_completed(device)
        os.close(os.open(device, os.O_WRONLY))
        time.sleep(INOTIFY_GRACE)
        base.run('udevadm', 'settle', '-t', '30')
        return reads_completed(device) - before

    def without_nowatch(self, device: str) -> None:
        """The installed rule without its nowatch line, until cleanup."""
        with open(INSTALLED_RULE) as rule:
            original = rule.read()

        def restore() -> None:
            with open(INSTALLED_RULE, 'w') as rule:
                rule.write(original)
            base.run('udevadm', 'control', '--reload')

        self.addCleanup(restore)
        with open(INSTALLED_RULE, 'w') as rule:
            rule.write(''.join(line for line in original.splitlines(True)
                               if 'nowatch' not in line))
        base.run('udevadm', 'control', '--reload')
        # the watch is set (or not) when udev handles an event
        base.run('udevadm', 'trigger', '--action=change', '--settle',
                 device)

    def test_a_write_close_of_the_cas_device_makes_no_udev_read(self):
        with open(INSTALLED_RULE) as rule:
            self.assertIn('OPTIONS:="nowatch"', rule.read())
        image = self.image('udev-watch', size_mb=16)
        props = self.props(image, 'wb')
        info = self.connector.connect_volume(props)
        path = info['path']

        with_rule = self.reads_after_a_write_close(path)
        self.without_nowatch(path)
        without_rule = self.reads_after_a_write_close(path)

        self.connector.disconnect_volume(props, info)
        if base.RESULTS:
            with open(os.path.join(base.RESULTS, 'udev-watch.txt'),
                      'w') as results:
                results.write('device reads after a write-close: %d with '
                              "the product's rule, %d without its nowatch "
                              'line\n' % (with_rule, without_rule))
        self.assertEqual(0, with_rule, 'reads after a write-close with the '
                         "product's nowatch rule")
        self.assertGreater(without_rule, 0, 'the control (Open CAS\'s watch '
                           'alone) made no read: the measure is blind')
        self.assert_clean_host()
