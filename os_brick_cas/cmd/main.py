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
import logging as std_logging
import os
import sys
from typing import Optional
import warnings

from oslo_config import cfg
from oslo_log import log as logging
from oslo_privsep import daemon as privsep_daemon

from os_brick_cas.cmd import args as args_mod
from os_brick_cas.cmd import config
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

#: commands that call casadm/rbd (root through privsep) on this host
ROOT_COMMANDS = frozenset(('status', 'doctor', 'flush', 'drain', 'undrain',
                           'owners', 'recover', 'discard'))
_CONFIG_OPTIONS = ('--config-file', '--config-dir')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='os-brick-cas',
        description='Open CAS caching of Cinder RBD volumes on this host.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='oslo.config file(s) with [os_brick_cas], '
                             'anywhere on the line (default: nova\'s '
                             'config as found on this host: oslo.config\'s '
                             'nova.conf and os-brick-cas.conf search, %s '
                             'and $%s; the files read are printed by '
                             'status and doctor)' % (
                                 '/' + config.KOLLA_NOVA_CONF, config.ENV))
    parser.add_argument('--config-dir', action='append', default=[],
                        help='directory of *.conf files, anywhere on the '
                             'line (default: nova.conf.d and '
                             'os-brick-cas.conf.d where oslo.config finds '
                             'them)')
    parser.add_argument('-v', '--verbose', action='store_true',
                        help='log progress (INFO) to stderr')
    parser.add_argument('--debug', action='store_true',
                        help='log everything (DEBUG) to stderr')
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
    config_args, rest = [], []
    tokens = iter(argv)
    for token in tokens:
        value = None
        if token in _CONFIG_OPTIONS:
            value = next(tokens, None)
        if value is not None:
            config_args += [token, value]
        elif token.split('=', 1)[0] in _CONFIG_OPTIONS:
            config_args.append(token)
        else:
            rest.append(token)
    return config_args, rest


#: libraries whose warnings repeat what a command reports itself
_CLIENT_LOGGERS = ('keystoneauth', 'keystoneauth1', 'cinderclient',
                   'urllib3', 'requests')


def setup_logging(args: argparse.Namespace) -> None:
    """oslo.log to stderr only: WARNING, INFO with -v, DEBUG with --debug.

    nova.conf's log_file/log_dir belong to nova-compute; the CLI never
    writes into them, and never logs to stdout (command output).
    """
    for name, value in (('debug', args.debug), ('log_file', None),
                        ('log_dir', None), ('use_stderr', True),
                        ('use_journal', False), ('use_syslog', False)):
        CONF.set_override(name, value)
    logging.setup(CONF, 'os-brick-cas')
    std_logging.getLogger().setLevel(
        std_logging.DEBUG if args.debug else
        std_logging.INFO if args.verbose else std_logging.WARNING)
    if not (args.debug or args.verbose):
        # the commands say in their own words when a service cannot be
        # reached; the client libraries' retries and discovery warnings
        # are for --verbose
        for name in _CLIENT_LOGGERS:
            std_logging.getLogger(name).setLevel(std_logging.ERROR)


def main(argv: Optional[list[str]] = None) -> int:
    if not sys.warnoptions:
        warnings.simplefilter('ignore', DeprecationWarning)
        warnings.simplefilter('ignore', PendingDeprecationWarning)
    if 'debug' not in CONF:
        logging.register_options(CONF)
    config_args, rest = split_config_args(
        sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(rest)
    files, dirs = config.default_config()
    try:
        CONF(config_args, project='os-brick-cas',
             default_config_files=files, default_config_dirs=dirs)
    except (cfg.Error, OSError) as exc:
        print('os-brick-cas: configuration: %s' % exc, file=sys.stderr)
        return 2
    setup_logging(args)
    if args.command in ROOT_COMMANDS and os.geteuid() != 0:
        print(must_be_root(args.command), file=sys.stderr)
        return 2
    args_mod.resolve_host(args)
    run_privileged_in_process_as_root()
    try:
        return args.func(args)
    except privsep_daemon.FailedToDropPrivileges:
        # a privsep daemon could not start (sudo/rootwrap refused)
        print(must_be_root(args.command), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('os-brick-cas %s: interrupted (Ctrl-C); "os-brick-cas status" '
              'shows where each volume stands' % args.command,
              file=sys.stderr)
        return args_mod.EXIT_INTERRUPTED


def must_be_root(command: str) -> str:
    """The one-line error of a command run without root."""
    return ('os-brick-cas %s: must run as root (it calls casadm and rbd) '
            '(try: sudo os-brick-cas %s ... / docker exec -u root '
            'nova_compute os-brick-cas %s ...)' % (command, command, command))


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
