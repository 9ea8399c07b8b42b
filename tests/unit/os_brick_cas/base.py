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

"""Unit-test base: privsep in-process, casadm mocked at processutils."""

import os
import re
from typing import Callable, Optional, Union

import fixtures
from oslo_concurrency import processutils
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from os_brick_cas import opts
from tests import privsep_fixture

DATA = os.path.join(os.path.dirname(__file__), 'data')

Result = tuple[int, str, str]
Reply = Union[Result, Callable[[list[str]], Result]]


def sample(name: str) -> str:
    with open(os.path.join(DATA, name)) as sample_file:
        return sample_file.read()


class FakeCasadm(fixtures.Fixture):
    """Answers casadm argv with scripted replies; records every argv.

    This is the process boundary: everything above processutils.execute
    (privsep entry points, parsing, error mapping, policy) is real.
    """

    def __init__(self):
        super().__init__()
        self.rules: list[tuple[re.Pattern, Reply]] = []
        self.calls: list[list[str]] = []

    def _setUp(self) -> None:
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.privileged.casadm.shutil.which',
            return_value='/usr/sbin/casadm'))
        self.useFixture(fixtures.MockPatch(
            'os_brick_cas.privileged.casadm.processutils.execute',
            side_effect=self._execute))

    def reply(self, pattern: str, result: Reply) -> None:
        """Answer matching argv with ``(exit_code, stdout, stderr)``.

        *pattern* is searched in the argv joined by spaces (no binary); the
        latest rule wins.
        """
        self.rules.insert(0, (re.compile(pattern), result))

    def _execute(self, binary: str, *args: str, **kwargs):
        argv = list(args)
        self.calls.append(argv)
        joined = ' '.join(argv)
        for pattern, result in self.rules:
            if pattern.search(joined):
                if callable(result):
                    result = result(argv)
                exit_code, out, err = result
                if exit_code != 0:
                    raise processutils.ProcessExecutionError(
                        exit_code=exit_code, stdout=out, stderr=err,
                        cmd=' '.join([binary] + argv))
                return out, err
        raise AssertionError('unexpected casadm call: %s' % joined)

    def argv_of(self, verb: str) -> list[list[str]]:
        return [argv for argv in self.calls if verb in argv]


class TestCase(testtools.TestCase):
    """Privsep in-process, fresh [os_brick_cas] options, temp lock dir."""

    def setUp(self) -> None:
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(cfg.CONF))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.opencas_conf = os.path.join(self.tmp, 'opencas.conf')
        self.conf.config(group=opts.GROUP, lock_path=self.tmp,
                         state_path=self.tmp,
                         opencas_conf=self.opencas_conf,
                         host_layout=os.path.join(self.tmp,
                                                  'host-layout.yaml'))
        self.useFixture(privsep_fixture.PrivsepInProcess())

    def set_instances(self, mapping: str,
                      fallback: Optional[str] = None) -> None:
        self.conf.config(group=opts.GROUP, cache_instances=dict(
            pair.split(':') for pair in mapping.split(',')))
        if fallback:
            self.conf.config(group=opts.GROUP, fallback_policy=fallback)


def list_csv(*rows: str) -> str:
    return '\n'.join(['type,id,disk,status,write policy,device'] +
                     list(rows)) + '\n'
