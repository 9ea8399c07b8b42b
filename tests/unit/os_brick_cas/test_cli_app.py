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

"""``os-brick-cas`` is a cliff application whose verbs are entry points."""

import configparser
import contextlib
import io
import os

from cliff import command
from cliff import display
import testtools

from os_brick_cas.cmd import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
#: verbs whose output takes cliff's -f/-c (python-openstackclient's
#: convention for every listing and show command)
LISTING = ('status', 'doctor', 'owners', 'bench', 'host plan', 'host apply',
           'host check', 'host stop', 'host forget', 'type-show',
           'fence-show')


def setup_cfg_verbs() -> dict[str, str]:
    """verb -> 'module:Class' of setup.cfg's os_brick_cas.cli entry points.

    cliff reads ``_`` in an entry point's name as a space: ``host_plan``
    is ``os-brick-cas host plan``.
    """
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, 'setup.cfg'))
    lines = parser['entry_points'][main.NAMESPACE].strip().splitlines()
    entries = (line.split('=') for line in lines)
    return {name.strip().replace('_', ' '): target.strip()
            for name, target in entries}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main.main(list(argv))
    return code, out.getvalue(), err.getvalue()


class CliAppTestCase(testtools.TestCase):

    def test_every_verb_is_a_cliff_command_of_setup_cfg(self):
        verbs = setup_cfg_verbs()
        self.assertTrue(set(LISTING) <= set(verbs), verbs)
        listed = dict(main.OsBrickCas().command_manager)
        for verb, target in verbs.items():
            self.assertIn(verb, listed, 'stale egg-info? re-run '
                                        '"python setup.py egg_info"')
            factory = listed[verb].load()
            self.assertEqual(target, '%s:%s' % (factory.__module__,
                                                factory.__name__))
            self.assertTrue(issubclass(factory, command.Command), verb)
            # the listing verbs print through cliff's formatters
            self.assertEqual(verb in LISTING,
                             issubclass(factory, display.DisplayCommandBase),
                             verb)

    def test_listing_verbs_take_cliffs_formats(self):
        for verb in LISTING:
            code, out, _ = run(*verb.split(), '--help')
            self.assertEqual(0, code)
            self.assertIn('-f {csv,json,table,value,yaml}', out, verb)

    def test_help_lists_the_verbs(self):
        code, out, _ = run('help')
        self.assertEqual(0, code)
        for verb in setup_cfg_verbs():
            self.assertRegex(out, r'\n  %s +\S' % verb)

    def test_no_verb_is_one_error_not_a_shell(self):
        code, out, err = run()
        self.assertEqual((2, ''), (code, out))
        self.assertIn('a command is required', err)
