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

"""The install pages' ``host install-files`` commands, run (issue 37).

Issue 37: the exporter had no supported deployment (no unit shipped; the
role, kolla and OSA deployed none) and the udev rule hard-coded the
namer's path. Each page that installs by hand (the manual guide and
kolla-ansible's host steps) gives an ``os-brick-cas host install-files``
command; it is taken from the page as written and run with the CLI under
a scratch ``--root``: it must install the exporter's unit (an
``[Install]`` section, so ``systemctl enable`` works; ExecStart naming this
installation's CLI), the udev rule naming this installation's namer, and
the nova-compute drop-in for the unit the page names; and the page must
then enable the exporter.
"""

import configparser
import contextlib
import io
import os
import re

import fixtures
import testtools

from os_brick_cas.cmd import main as cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PAGES = ('doc/source/install/index.rst',
         'doc/source/install/kolla-ansible.rst')
EXPORTER_UNIT = 'etc/systemd/system/os-brick-cas-exporter.service'
UDEV_RULE = 'etc/udev/rules.d/60-os-brick-cas-rbd.rules'


def install_commands(page: str) -> list[list[str]]:
    """argv of each ``os-brick-cas host install-files`` line of *page*."""
    with open(os.path.join(ROOT, page)) as handle:
        text = re.sub(r'\\\n\s*', '', handle.read())
    return [line.split('#')[0].split()[1:] for line in
            (raw.strip() for raw in text.splitlines())
            if line.startswith('os-brick-cas host install-files')]


class DeployPagesHostFilesTestCase(testtools.TestCase):

    def run_cli(self, argv: list[str], root: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv + ['--root', root])
        self.assertEqual(0, code, err.getvalue())
        return out.getvalue()

    def test_each_page_installs_and_enables_the_exporter(self):
        for page in PAGES:
            commands = install_commands(page)
            self.assertTrue(commands, '%s gives no host install-files '
                                      'command' % page)
            root = self.useFixture(fixtures.TempDir()).path
            for argv in commands:
                self.run_cli(argv, root)
            unit = configparser.ConfigParser(strict=False,
                                             interpolation=None)
            self.assertTrue(unit.read(os.path.join(root, EXPORTER_UNIT)),
                            '%s: no exporter unit installed' % page)
            self.assertEqual('multi-user.target',
                             unit['Install']['WantedBy'], page)
            cli, verb = unit['Service']['ExecStart'].split()[:2]
            self.assertEqual('exporter', verb, page)
            self.assertTrue(os.access(cli, os.X_OK), (page, cli))
            with open(os.path.join(ROOT, page)) as handle:
                self.assertIn('systemctl enable --now '
                              'os-brick-cas-exporter.service',
                              handle.read(), page)
            # the rule names this installation's namer, not /usr/local/bin
            with open(os.path.join(root, UDEV_RULE)) as rule:
                [namer] = re.findall(r'PROGRAM="(\S+)', rule.read())
            self.assertTrue(os.access(namer, os.X_OK), (page, namer))
        # kolla (the last page, its root): its container unit after Open CAS
        dropin = configparser.ConfigParser(strict=False, interpolation=None)
        self.assertTrue(dropin.read(os.path.join(
            root, 'etc/systemd/system/kolla-nova_compute-container.service.d/'
                  'os-brick-cas.conf')))
        self.assertIn('open-cas.service', dropin['Unit']['After'])
