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

"""The manual install guide's nova.conf, read as nova-compute reads it.

The block under "Add to nova.conf" in doc/source/install/index.rst is
parsed by oslo.config with the product's registered options; it must name
the directories the Ansible role prepares (lock_path, state_path,
host_layout), or doctor fails lock-path on a role-prepared host.
"""

import os
import re
import tempfile

from oslo_config import cfg
import testtools
import yaml

from nova_ext import opts as nova_opts
from os_brick_cas.metrics import opts as metrics_opts
from os_brick_cas import opts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, 'doc', 'source', 'install', 'index.rst')
ROLE_DEFAULTS = os.path.join(ROOT, 'deploy', 'ansible', 'roles',
                             'os_brick_cas', 'defaults', 'main.yml')
#: nova's own options in the block (not the product's)
NOVA_DEFAULT_KEYS = {'compute_driver', 'resume_guests_state_on_host_boot'}


def literal_block_after(text: str, marker: str) -> str:
    """The indented ``::`` block that follows the line with *marker*."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    block, indent = [], None
    for line in lines[start + 1:]:
        if not line.strip():
            block.append('')
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        if width < indent:
            break
        block.append(line[indent:])
    return '\n'.join(block).strip() + '\n'


def sections(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    group = None
    for line in text.splitlines():
        header = re.match(r'^\[(.+)\]$', line)
        if header:
            group = header.group(1)
            found.setdefault(group, set())
        elif '=' in line and group:
            found[group].add(line.split('=', 1)[0].strip())
    return found


class InstallGuideNovaConfTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        with open(GUIDE) as guide:
            self.block = literal_block_after(guide.read(),
                                             'Add to nova.conf')
        self.conf = cfg.ConfigOpts()
        for group, options in (
                opts.list_opts() + metrics_opts.list_opts() +
                nova_opts.list_opts()):
            self.conf.register_opts(list(options), group=group)
        handle, path = tempfile.mkstemp(suffix='.conf')
        with os.fdopen(handle, 'w') as out:
            out.write(self.block)
        self.addCleanup(os.unlink, path)
        self.conf(['--config-file', path], project='nova')

    def test_every_product_key_is_a_registered_option(self):
        for group, keys in sections(self.block).items():
            for key in keys:
                if group == 'DEFAULT':
                    self.assertIn(key, NOVA_DEFAULT_KEYS)
                    continue
                self.assertIn(key, self.conf[group], (group, key))

    def test_names_the_directories_the_role_prepares(self):
        with open(ROLE_DEFAULTS) as defaults:
            role = yaml.safe_load(defaults)
        group = self.conf[opts.GROUP]
        self.assertEqual(
            (role['os_brick_cas_lock_path'], role['os_brick_cas_state_path'],
             role['os_brick_cas_host_layout_file']),
            (group.lock_path, group.state_path, group.host_layout))
        # set in the file, not only equal to a default that may change
        self.assertEqual(set(), {'lock_path', 'state_path', 'host_layout'} -
                         sections(self.block)['os_brick_cas'])

    def test_guide_installs_host_files_with_the_cli(self):
        # not a sys.prefix path: pip with Debian's system Python puts the
        # files under /usr/local while sys.prefix is /usr
        with open(GUIDE) as guide:
            text = guide.read()
        self.assertIn('os-brick-cas host install-files', text)
        self.assertNotIn("print(sys.prefix)')/share", text)
