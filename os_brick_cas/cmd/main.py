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

"""``os-brick-cas``: the operator command line of os-brick-cas."""

import argparse
import importlib
import os
import sys
from typing import Optional

from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas import opts  # noqa: F401  (registers [os_brick_cas])
from os_brick_cas import version

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: modules that add subcommands; optional parts (nova_ext, cinder_ext) may be
#: absent or fail to import without breaking the host commands.
SUBCOMMAND_MODULES = [
    'os_brick_cas.cmd.demo',
    'os_brick_cas.cmd.status',
    'os_brick_cas.cmd.doctor',
    'os_brick_cas.cmd.flush',
    'os_brick_cas.cmd.drain',
    'os_brick_cas.cmd.bench',
    'os_brick_cas.cmd.exporter',
    'os_brick_cas.cmd.host',
    'cinder_ext.admin',
    'nova_ext.cmd',
]

#: read by default on a compute node, where [os_brick_cas] lives
NOVA_CONF = '/etc/nova/nova.conf'
NOVA_CONF_DIR = '/etc/nova/nova.conf.d'
_CONFIG_OPTIONS = ('--config-file', '--config-dir')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='os-brick-cas',
        description='Open CAS caching of Cinder RBD volumes on this host.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='oslo.config file(s) with [os_brick_cas], '
                             'anywhere on the line (default: %s if it '
                             'exists)' % NOVA_CONF)
    parser.add_argument('--config-dir', action='append', default=[],
                        help='directory of *.conf files, anywhere on the '
                             'line (default: %s if it exists)' %
                             NOVA_CONF_DIR)
    parser.add_argument('--debug', action='store_true')
    parser.add_argument('--version', action='version',
                        version='%(prog)s ' + version.version_string())
    sub = parser.add_subparsers(dest='command', required=True)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            LOG.debug('subcommands of %s unavailable: %s', name, exc)
            continue
        register = getattr(module, 'register_subcommands', None) or getattr(
            module, 'add_parser', None)
        if register is not None:
            register(sub)
    return parser


def split_config_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(config options, the rest)``: config options may follow the verb."""
    config, rest = [], []
    tokens = iter(argv)
    for token in tokens:
        value = None
        if token in _CONFIG_OPTIONS:
            value = next(tokens, None)
        if value is not None:
            config += [token, value]
        elif token.split('=', 1)[0] in _CONFIG_OPTIONS:
            config.append(token)
        else:
            rest.append(token)
    return config, rest


def default_config() -> tuple[list[str], list[str]]:
    """os-brick-cas's own files, then a compute node's nova.conf(.d)."""
    files = cfg.find_config_files(project='os-brick-cas')
    files += [NOVA_CONF] if os.path.isfile(NOVA_CONF) else []
    dirs = [NOVA_CONF_DIR] if os.path.isdir(NOVA_CONF_DIR) else []
    return files, dirs


def main(argv: Optional[list[str]] = None) -> int:
    if 'debug' not in CONF:
        logging.register_options(CONF)
    config_args, rest = split_config_args(
        sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(rest)
    files, dirs = default_config()
    try:
        CONF(config_args, project='os-brick-cas',
             default_config_files=files, default_config_dirs=dirs)
    except (cfg.Error, OSError) as exc:
        print('os-brick-cas: configuration: %s' % exc, file=sys.stderr)
        return 2
    CONF.set_override('debug', args.debug)
    logging.setup(CONF, 'os-brick-cas')
    run_privileged_in_process_as_root()
    return args.func(args)


def run_privileged_in_process_as_root() -> None:
    """An operator running the CLI as root needs no privsep daemon.

    Services (nova-compute) start the daemon through rootwrap/sudo; a root
    shell runs the same validated entry points in-process.
    """
    if os.geteuid() != 0:
        return
    import os_brick.privileged
    import os_brick_cas.privileged
    for context in (os_brick_cas.privileged.default,
                    os_brick_cas.privileged.flush,
                    os_brick.privileged.default):
        context.set_client_mode(False)


if __name__ == '__main__':
    sys.exit(main())
