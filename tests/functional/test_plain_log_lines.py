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

"""A log record the library writes, as the CLI's stderr shows it (issue 37).

Without -v/--debug it is one plain line that names the command run
(``os-brick-cas doctor: ...``), as the command's own messages read; with
-v it is oslo.log's line (time, pid, level, logger). The record used is
the journal's quarantine of a bad life-cycle record, which doctor's drift
check reads (logged at ERROR by os_brick_cas.lifecycle.journal).
"""

import os
import re

from os_brick_cas.lifecycle import journal
from tests.functional import test_cli

VOL_WB = test_cli.VOL_WB
#: oslo.log's default line: date, time, pid, level
OSLO_LINE = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+ '
                       r'(?:ERROR|WARNING) ')


class PlainLogLinesTestCase(test_cli.CliTestCase):

    run_cli = test_cli.ConventionsTestCase.run_cli

    def plant_bad_record(self) -> None:
        os.makedirs(journal.journal_dir(), exist_ok=True)
        with open(os.path.join(journal.journal_dir(),
                               'rbd-volumes--x.json'), 'w') as record:
            record.write('not a record')

    def test_a_library_error_is_one_plain_line_without_verbose(self):
        self.attach(VOL_WB, 'wb')
        conf = test_cli.write_cli_conf(self)
        self.plant_bad_record()
        done = self.run_cli('doctor', '--config-file', conf)
        logged = [line for line in done.stderr.splitlines()
                  if 'rbd-volumes--x.json' in line]
        self.assertEqual(1, len(logged), done.stderr)
        self.assertTrue(logged[0].startswith(
            'os-brick-cas doctor: Life-cycle record '), logged[0])
        self.assertEqual([], [line for line in done.stderr.splitlines()
                              if OSLO_LINE.match(line)], done.stderr)
        # the finding itself is doctor's (FAIL drift), on stdout
        self.assertIn('rbd-volumes--x.json', done.stdout)

    def test_verbose_keeps_oslo_logs_lines(self):
        self.attach(VOL_WB, 'wb')
        conf = test_cli.write_cli_conf(self)
        self.plant_bad_record()
        done = self.run_cli('-v', 'doctor', '--config-file', conf)
        logged = [line for line in done.stderr.splitlines()
                  if 'rbd-volumes--x.json' in line and
                  'Life-cycle record' in line]
        self.assertTrue(logged, done.stderr)
        self.assertTrue(OSLO_LINE.match(logged[0]), logged[0])
