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

"""``os-brick-cas doctor``: is this host ready to cache volumes safely?

One line per finding, ``OK``, ``WARN``, ``FAIL`` or ``SKIP`` (not
checked, with why), each problem with what to do. The checks are the
registry in :mod:`os_brick_cas.cmd.checks`. Exit codes follow
oslo.upgradecheck: 0 all OK, 1 warnings only, 2 at least one failure, 255
when a check itself crashed.
"""

import argparse
import dataclasses
from typing import Callable, Optional

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas.cmd import checks
from os_brick_cas.cmd.checks import owners as owner_checks
from os_brick_cas.cmd import commands
from os_brick_cas.cmd import config

CONF = cfg.CONF
OK, WARN, FAIL, SKIP = checks.OK, checks.WARN, checks.FAIL, checks.SKIP
Finding = checks.Finding
exit_code = checks.exit_code
owner_client = owner_checks.owner_client
#: result word per exit code, as in the JSON document
RESULTS = {0: OK, 1: WARN, 2: FAIL, 255: checks.ERROR}

#: one row per finding (``-f value``/``csv``/``-c``)
COLUMNS = ('level', 'check', 'message')


def check_host(casadm: casadm_mod.Casadm, conf: cfg.ConfigOpts = CONF,
               host: Optional[str] = None) -> list[Finding]:
    """Every finding about this host, in the order an operator fixes them."""
    return checks.run(checks.Host(
        casadm=casadm, conf=conf, host=host or config.nova_host(conf),
        config_files=config.files_read(conf)))


def _table(host: str, files: list[str], findings: list[Finding]) -> str:
    lines = ['host %s; configuration read from: %s' % (
        host, ', '.join(files) or 'no file')]
    lines += [str(finding) for finding in findings]
    bad = [f for f in findings if f.level not in (OK, SKIP)]
    skipped = len([f for f in findings if f.level == SKIP])
    lines.append('%d finding(s) need attention' % len(bad) if bad else
                 'all checks that ran passed; %d not checked (SKIP)'
                 % skipped if skipped else 'all checks passed')
    return '\n'.join(lines) + '\n'


def run(args: argparse.Namespace, emit: Callable[..., None]) -> int:
    files = config.files_read(CONF)
    findings = check_host(casadm_mod.Casadm(), CONF, args.host)
    code = exit_code(findings)
    document = {
        'result': RESULTS[code],
        'exit_code': code,
        'host': args.host,
        'config_files': files,
        'findings': [dataclasses.asdict(f) for f in findings],
    }
    emit(document, COLUMNS,
         lambda: ((f.level, f.check, f.message) for f in findings),
         lambda: _table(args.host, files, findings))
    return code


class Doctor(commands.HostReport):
    """is this host ready to cache volumes safely? exit 0/1/2/255

    Checks casadm, kernel and modules, rootwrap, udev, state_path,
    configuration, cache instances, cores and owners; exits 0 OK, 1
    warnings, 2 failures, 255 internal error (oslo.upgradecheck).
    """

    report = staticmethod(run)
