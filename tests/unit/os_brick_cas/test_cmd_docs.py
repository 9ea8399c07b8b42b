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


"""The operator docs agree with the CLI and with each other (issue 23, 7).

Each test names the contradiction it keeps out; they all failed on the
tree before the fix.
"""

import argparse
import glob
import os
import re
import socket
from typing import Iterator

from oslo_config import cfg
import testtools

from os_brick_cas.cmd.checks import host as host_checks
from os_brick_cas.cmd import config
from os_brick_cas.cmd import main
from os_brick_cas import rbd_names

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def read(relative: str) -> str:
    with open(os.path.join(REPO, relative)) as doc:
        return doc.read()


def operator_docs() -> dict[str, str]:
    """README and every page under doc/source, flattened to one line each."""
    paths = ['README.rst'] + sorted(
        os.path.relpath(path, REPO) for path in
        glob.glob(os.path.join(REPO, 'doc/source/**/*.rst'), recursive=True))
    return {path: ' '.join(read(path).split()) for path in paths}


def rendered_help(parser: argparse.ArgumentParser, prog: str
                  ) -> Iterator[tuple[str, argparse.Action, str]]:
    """(command, action, help as argparse and the CLI reference render it).

    The reference (cliff's autoprogram-cliff) renders each command's own
    argparse parser, as ``os-brick-cas help COMMAND`` does.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from rendered_help(sub, '%s %s' % (prog, name))
        elif action.help and action.help is not argparse.SUPPRESS:
            yield prog, action, action.help % dict(vars(action), prog=prog)


class DocsAgreeTestCase(testtools.TestCase):

    def test_devstack_enables_os_brick_cas_before_ceph_everywhere(self):
        # install/index.rst said "after devstack-plugin-ceph"
        for path, text in operator_docs().items():
            self.assertNotRegex(text, r'os-brick-cas``\s+after\s+'
                                      r'``devstack-plugin-ceph', path)
        guide = read('doc/source/admin/host-guide.rst')   # from README
        self.assertLess(guide.index('enable_plugin os-brick-cas'),
                        guide.index('enable_plugin devstack-plugin-ceph'))
        self.assertIn('Enable os-brick-cas *before* devstack-plugin-ceph',
                      read('devstack/settings'))

    def test_doctor_exit_codes_are_0_1_2(self):
        # README: "exit 1 if any"; admin guide: "exits 1 when anything
        # needs attention"; doctor exits 2 on failures
        for path, text in operator_docs().items():
            self.assertNotRegex(text, r'doctor[^.]*exits? 1 (if any|when '
                                      r'anything)', path)
        self.assertIn('0 all OK, 1 warnings only, 2 any failure, 255',
                      operator_docs()['doc/source/admin/index.rst'])

    def test_snippets_do_not_ask_for_the_no_op_nova_shim_install(self):
        for path in glob.glob(os.path.join(REPO, 'etc/snippets/*')):
            with open(path) as snippet:
                self.assertNotIn('nova-shim install', snippet.read(), path)

    def test_opencas_example_uses_the_current_link_name(self):
        # it showed the 1.x /dev/disk/by-id/rbd-<pool>-<image> name
        example = read('etc/opencas/opencas.conf.example')
        links = re.findall(r'/dev/disk/by-id/(rbd-\S+)', example)
        self.assertTrue(links)
        for name in links:
            if '<' not in name:
                self.assertIsNotNone(rbd_names.parse_link_name(name), name)
            self.assertTrue(name.startswith(rbd_names.PREFIX), name)

    def test_maintenance_advice_is_drain_not_flush_then_migrate(self):
        # upgrades.rst: "flush --all, then stop or migrate": running
        # guests dirty the cache again right after the flush
        for path, text in operator_docs().items():
            self.assertNotRegex(text, r'flush --all``[^.;]*then (stop|'
                                      r'migrate)', path)
        self.assertIn('``os-brick-cas drain --all`` (write-back data to '
                      'Ceph, and kept there), then live-migrate',
                      operator_docs()['doc/source/admin/upgrades.rst'])

    def test_cli_reference_is_the_commands(self):
        reference = read('doc/source/cli/index.rst')
        self.assertIn('.. autoprogram-cliff:: os_brick_cas.cmd.main.'
                      'OsBrickCas\n', reference)
        self.assertIn('.. autoprogram-cliff:: %s\n' % main.NAMESPACE,
                      reference)

    def test_every_default_shown_is_the_real_default(self):
        # --host showed the build machine's name as its default
        names = {socket.gethostname(), socket.getfqdn()}
        shown = 0
        for prog, action, text in (
                found for prog, parser in main.parsers()
                for found in rendered_help(parser, prog)):
            where = '%s %s' % (prog, '/'.join(action.option_strings))
            for name in names:
                self.assertNotIn(name, text, where)
            if action.dest == 'host':
                self.assertIn(config.HOST_PLACEHOLDER, text, where)
            for match in re.finditer(r'\(default: ([^)]*)', text):
                shown += 1
                value = match.group(1)
                if action.default not in (None, []):
                    # sphinx-argparse renders %(default)s as repr()
                    self.assertEqual(str(action.default),
                                     value.split()[0].strip('\'"'), where)
                for group, option in re.findall(r'\[(\w+)\] (\w+)', value):
                    if group != 'DEFAULT':      # [DEFAULT] host is nova's
                        self.assertIn(option, cfg.CONF[group], where)
        self.assertGreater(shown, 10)

    def test_doctor_knows_the_shipped_rootwrap_filters(self):
        shipped = read('etc/rootwrap.d/os-brick-cas.filters')
        for context in host_checks.PRIVSEP_CONTEXTS:
            self.assertIn(': ' + host_checks.FILTER % context + '\n',
                          shipped)
