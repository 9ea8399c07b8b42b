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

"""The host guide's simulated-host recipe, run as a newcomer would run it.

Issue 37: following the guide on the simulated host must reach a doctor
that passes (exit 0: every check that ran is OK; the udev rule and the
kernel modules are not checked on a simulated host, and doctor says so),
without editing anything by hand. The block is taken from the page itself,
so the page cannot drift from what works.
"""

import os
import re
import subprocess
import sys

from tests.functional import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, 'doc', 'source', 'admin', 'host-guide.rst')
#: the guide's scratch directory, replaced by the test's own
SIM = '/tmp/sim'


def recipe() -> list[str]:
    """The literal block that boots the simulated host, one command a line.

    Continuation lines (a trailing backslash) are joined.
    """
    with open(GUIDE) as page:
        text = page.read()
    start = text.index('To try them on a machine without Open CAS')
    block = text[text.index('::\n\n', start) + 4:]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith('    '):
            break
        lines.append(line[4:])
    return [command for command in
            re.sub(r'\\\n\s*', '', '\n'.join(lines)).splitlines() if command]


class GuideRecipeTestCase(base.FunctionalTestCase):

    def test_recipe_reaches_doctor_passing(self):
        commands = recipe()
        self.assertIn('. .venv/bin/activate', commands)
        doctor = [c for c in commands if 'os-brick-cas doctor' in c]
        self.assertEqual(1, len(doctor), commands)
        scratch = os.path.join(self.tmp, 'sim')
        bin_dir = os.path.dirname(sys.executable)

        def as_run(command: str) -> str:
            if command == '. .venv/bin/activate':
                # the venv this test runs in is the one tools/demo.sh made
                return 'PATH=%s:$PATH' % bin_dir
            command = command.replace(SIM, scratch)
            if command in doctor:
                # doctor's own exit status, as the recipe runs it
                return '%s; echo "doctor exit: $?"' % command.split('#')[0]
            return command

        script = '\n'.join(as_run(c) for c in commands)
        # the last command removes what the simulated host made in /dev
        result = subprocess.run(['bash', '-c', script], capture_output=True,
                                text=True, timeout=600, cwd=ROOT)
        findings = [line for line in result.stdout.splitlines()
                    if re.match(r'^(OK|WARN|FAIL|SKIP) ', line)]
        self.assertTrue(findings, result.stdout + result.stderr)
        attention = [line for line in findings
                     if line.startswith(('WARN', 'FAIL'))]
        self.assertEqual([], attention)
        self.assertIn('doctor exit: 0', result.stdout.splitlines())
        self.assertIn('all checks that ran passed', result.stdout)
        # what a simulated host cannot show is said, not passed
        self.assertEqual(
            ['SKIP kernel-modules', 'SKIP udev-rule'],
            sorted(' '.join(line.split()[:2]).rstrip(':')
                   for line in findings if line.startswith('SKIP')
                   and ('kernel-modules' in line or 'udev-rule' in line)))
        self.assertIn('OK   mode wb -> cache instance 2 is running in mode '
                      'wb', findings)
