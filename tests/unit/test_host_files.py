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

"""``os-brick-cas host install-files``: the package's files, rendered.

A pip installation is laid out in a temporary prefix as pip lays it out
(``bin/`` and ``share/os-brick-cas/etc/`` from setup.cfg's data_files),
for a virtualenv and for Debian's system Python (``/usr/local``, while
``sys.prefix`` is ``/usr``); its record is what importlib.metadata gives.
"""

import configparser
import contextlib
import io
import os
import shutil
import subprocess
import sys

import fixtures
import testtools

from os_brick_cas.cmd import install_files
from os_brick_cas.host import installed_files
from tests.unit import test_udev_rule

ROOT = test_udev_rule.ROOT


#: where the package's modules go under a prefix (Debian: dist-packages)
SITE = 'lib/python3/dist-packages'


def fake_install(prefix: str, python: str = '/usr/bin/python3',
                 shebang: str = '') -> list[str]:
    """Lay out the package's data files and commands under *prefix*.

    The console scripts start with *shebang* (default: ``#!<python>``).
    """
    record = []
    for share_path, tree_path in installed_files.SOURCES.values():
        dest = os.path.join(prefix, installed_files.SHARE, share_path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(os.path.join(ROOT, 'etc', tree_path), dest)
        record.append(dest)
    for name in (installed_files.NAMER, installed_files.CLI):
        dest = os.path.join(prefix, 'bin', name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, 'w') as script:
            script.write((shebang or '#!%s\n' % python) +
                         'import sys\nfrom os_brick_cas.rbd_names import '
                         'namer_main\n')
        os.chmod(dest, 0o755)
        record.append(dest)
    module = os.path.join(prefix, SITE, 'os_brick_cas', 'rbd_names.py')
    os.makedirs(os.path.dirname(module), exist_ok=True)
    shutil.copy(os.path.join(ROOT, 'os_brick_cas', 'rbd_names.py'), module)
    return record + [module]


class HostFilesTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.tmp, 'root')

    def files(self, prefix: str, **layout: str
              ) -> dict[str, installed_files.HostFile]:
        record = fake_install(os.path.join(self.tmp, prefix.lstrip('/')),
                              **layout)
        return {item.dest: item
                for item in installed_files.plan(record=record)}

    def test_debian_system_python_paths_under_usr_local(self):
        prefix = os.path.join(self.tmp, 'usr/local')
        files = self.files('/usr/local')
        rule = files['/etc/udev/rules.d/60-os-brick-cas-rbd.rules']
        self.assertEqual(os.path.join(prefix, installed_files.SHARE),
                         os.path.dirname(os.path.dirname(os.path.dirname(
                             rule.source))))
        [program] = [value for line in test_udev_rule.rule_lines(
            rule.content) for key, op, value in line if key == 'PROGRAM']
        # the console script's Python runs the namer module without site
        self.assertEqual('/usr/bin/python3 -I -S %s %%n' % os.path.join(
            prefix, SITE, 'os_brick_cas', 'rbd_names.py'), program)
        # nothing else of the rule changed
        with open(os.path.join(ROOT, 'etc', 'udev', 'rules.d',
                               test_udev_rule.RULE_NAME)) as shipped:
            self.assertEqual(
                [line for line in shipped.read().splitlines()
                 if 'PROGRAM=' not in line],
                [line for line in rule.content.splitlines()
                 if 'PROGRAM=' not in line])

    def test_the_rules_namer_runs_with_the_standard_library_only(self):
        venv = os.path.join(self.tmp, 'opt/venv')
        rule = self.files('/opt/venv', python=sys.executable)[
            '/etc/udev/rules.d/60-os-brick-cas-rbd.rules']
        [program] = [value for line in test_udev_rule.rule_lines(
            rule.content) for key, op, value in line if key == 'PROGRAM']
        argv = program.split()
        self.assertEqual([sys.executable, '-I', '-S'], argv[:3])
        self.assertTrue(argv[3].startswith(venv), argv)
        # as udev runs it: no environment, no site-packages; a device krbd
        # does not describe gets no name, a bad argument the usage
        for device, code in (('4095', 1), ('x', 2)):
            done = subprocess.run(argv[:4] + [device], env={},
                                  capture_output=True, text=True)
            self.assertEqual((code, ''), (done.returncode, done.stdout),
                             done.stderr)

    def test_pips_long_path_console_script_names_its_python(self):
        python = '/opt/' + 'x' * 130 + '/bin/python3'
        files = self.files('/opt/long', shebang=(
            "#!/bin/sh\n'''exec' %s \"$0\" \"$@\"\n' '''\n" % python))
        rule = files['/etc/udev/rules.d/60-os-brick-cas-rbd.rules']
        self.assertIn('PROGRAM="%s -I -S ' % python, rule.content)

    def test_a_path_udev_cannot_run_is_refused(self):
        for bad in ('/opt/my venv/bin/python3', '/opt/v%n/bin/python3'):
            error = self.assertRaises(installed_files.HostFilesError,
                                      self.files, '/opt/v', python=bad)
            self.assertIn('udev cannot run %s' % bad, str(error))

    def test_virtualenv_exporter_unit_runs_its_cli(self):
        prefix = os.path.join(self.tmp, 'opt/nova')
        unit = self.files('/opt/nova')[
            '/etc/systemd/system/os-brick-cas-exporter.service']
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.read_string(unit.content)
        self.assertEqual(
            os.path.join(prefix, 'bin', installed_files.CLI) + ' exporter',
            parser['Service']['ExecStart'])
        self.assertEqual('multi-user.target', parser['Install']['WantedBy'])

    def test_rootwrap_filter_and_dropins_where_asked(self):
        record = fake_install(os.path.join(self.tmp, 'venv'))
        files = installed_files.plan(
            rootwrap_dir='/etc/nova/rootwrap.d',
            nova_compute_units=('nova-compute.service',
                                'devstack@n-cpu.service'),
            record=record)
        self.assertEqual(
            ['/etc/udev/rules.d/60-os-brick-cas-rbd.rules',
             '/etc/nova/rootwrap.d/os-brick-cas.filters',
             '/etc/systemd/system/nova-compute.service.d/os-brick-cas.conf',
             '/etc/systemd/system/devstack@n-cpu.service.d/'
             'os-brick-cas.conf',
             '/etc/systemd/system/os-brick-cas-exporter.service'],
            [item.dest for item in files])
        with open(os.path.join(ROOT, 'etc', 'rootwrap.d',
                               'os-brick-cas.filters')) as shipped:
            self.assertEqual(shipped.read(), files[1].content)

    def test_install_then_unchanged_then_check_finds_an_edit(self):
        record = fake_install(os.path.join(self.tmp, 'venv'))
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.host.installed_files._record', return_value=record))

        def run(*argv):
            parser = install_files.argparse.ArgumentParser()
            install_files.add_parser(parser.add_subparsers())
            args = parser.parse_args(['host', 'install-files', '--root',
                                      self.root] + list(argv))
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = args.func(args)
            return code, out.getvalue()

        code, out = run()
        self.assertEqual(0, code)
        self.assertEqual(4, out.count('installed '))
        self.assertIn('udevadm control --reload', out)
        rule = os.path.join(self.root,
                            'etc/udev/rules.d/60-os-brick-cas-rbd.rules')
        self.assertEqual(0o644, os.stat(rule).st_mode & 0o777)
        self.assertEqual((0, 4), (run()[0], run()[1].count('unchanged ')))
        with open(rule, 'a') as edited:
            edited.write('# by hand\n')
        code, out = run('--check')
        self.assertEqual(1, code)
        self.assertIn('differs /etc/udev/rules.d/', out)
        code, out = run('--only', 'udev-rule')
        self.assertEqual((0, 1), (code, out.count('installed ')))

    def test_missing_package_files_say_what_to_do(self):
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.host.installed_files.TREE',
            os.path.join(self.tmp, 'none')))
        self.useFixture(fixtures.MockPatch(
            'sysconfig.get_path', return_value=os.path.join(self.tmp, 'x')))
        self.useFixture(fixtures.MockPatch('os.path.isfile',
                                           return_value=False))
        error = self.assertRaises(installed_files.HostFilesError,
                                  installed_files.share_dir, [])
        self.assertIn('reinstall os-brick-cas', str(error))
