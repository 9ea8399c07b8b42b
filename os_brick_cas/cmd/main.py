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

"""``os-brick-cas``: the operator command line of os-brick-cas.

A cliff application: its verbs are the ``os_brick_cas.cli`` entry points
(:mod:`os_brick_cas.cmd.commands`), their output formats cliff's.
"""

import argparse
import logging as std_logging
import sys
from typing import Any, Iterator, Optional
import warnings

from cliff import app
from cliff import commandmanager
from oslo_config import cfg
from oslo_log import log as logging

from os_brick_cas.cmd import config
from os_brick_cas import opts  # noqa: F401  (registers [os_brick_cas])
from os_brick_cas import version

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

NAMESPACE = 'os_brick_cas.cli'
_CONFIG_OPTIONS = ('--config-file', '--config-dir')


class Stop(BaseException):
    """Ends the run with an exit code (cliff would turn errors into 1)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Commands(commandmanager.CommandManager):
    """The verbs registered under :data:`NAMESPACE`, those that can load.

    Verbs of optional parts (nova_ext, cinder_ext) whose modules cannot be
    imported here are not listed.
    """

    def load_commands(self, namespace: str) -> None:
        super().load_commands(namespace)
        for name, entry in list(self.commands.items()):
            try:
                factory = entry.load()
            except (ImportError, AttributeError) as exc:
                LOG.debug('verb %s unavailable: %s', name, exc)
                del self.commands[name]
                continue
            available = getattr(factory, 'available', None)
            if available is not None and not available():
                del self.commands[name]


class OsBrickCas(app.App):
    """The ``os-brick-cas`` application."""

    NAME = 'os-brick-cas'

    def __init__(self, config_args: Optional[list[str]] = None) -> None:
        self.config_args = config_args or []
        super().__init__(
            description='Open CAS caching of Cinder RBD volumes on this '
                        'host.',
            version=version.version_string(),
            command_manager=Commands(NAMESPACE), deferred_help=True)

    def build_option_parser(self, description: Optional[str],
                            version: Optional[str],
                            argparse_kwargs: Optional[dict] = None
                            ) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(
            prog=self.NAME, description=description, add_help=False,
            allow_abbrev=False)
        parser.add_argument('--config-file', action='append', default=[],
                            help='oslo.config file(s) with [os_brick_cas], '
                                 'anywhere on the line (default: nova\'s '
                                 'config as found on this host: '
                                 'oslo.config\'s nova.conf and '
                                 'os-brick-cas.conf search, %s and $%s; '
                                 'the files read are printed by status and '
                                 'doctor)' % ('/' + config.KOLLA_NOVA_CONF,
                                              config.ENV))
        parser.add_argument('--config-dir', action='append', default=[],
                            help='directory of files ending in .conf, '
                                 'anywhere on the line (default: '
                                 'nova.conf.d and '
                                 'os-brick-cas.conf.d where oslo.config '
                                 'finds them)')
        parser.add_argument('-v', '--verbose', action='store_true',
                            help='log progress (INFO) to stderr')
        parser.add_argument('--debug', action='store_true',
                            help='log everything (DEBUG) to stderr')
        parser.add_argument('--version', action='version',
                            version='%s %s' % (self.NAME, version))
        parser.add_argument('-h', '--help', dest='deferred_help',
                            action='store_true',
                            help='show help (of a command: os-brick-cas '
                                 'help COMMAND) and exit')
        return parser

    def configure_logging(self) -> None:
        """Done in :meth:`initialize_app`, once the configuration is read."""

    def initialize_app(self, argv: list[str]) -> None:
        files, dirs = config.default_config()
        try:
            CONF(self.config_args, project='os-brick-cas',
                 default_config_files=files, default_config_dirs=dirs)
        except (cfg.Error, OSError) as exc:
            print('os-brick-cas: configuration: %s' % exc, file=sys.stderr)
            raise Stop(2)
        setup_logging(self.options)

    def prepare_to_run_command(self, cmd: Any) -> None:
        """Log lines name the verb run (``os-brick-cas flush: ...``)."""
        if not (self.options.debug or self.options.verbose):
            plain_log_lines(cmd.cmd_name or '')

    def interact(self) -> None:
        """No interactive shell: a command is required."""
        self.parser.print_usage(sys.stderr)
        print('os-brick-cas: a command is required ("os-brick-cas help" '
              'lists them)', file=sys.stderr)
        raise Stop(2)


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
        plain_log_lines()
        # the commands say in their own words when a service cannot be
        # reached; the client libraries' retries and discovery warnings
        # are for --verbose
        for name in _CLIENT_LOGGERS:
            std_logging.getLogger(name).setLevel(std_logging.ERROR)


class PlainLine(std_logging.Formatter):
    """A log record as one plain line: ``os-brick-cas VERB: message``.

    Without -v/--debug a warning reads like the command's own messages: no
    time, level, logger name or traceback, and never more than one line.
    """

    def __init__(self, verb: str = '') -> None:
        super().__init__()
        self.prefix = 'os-brick-cas %s: ' % verb if verb else 'os-brick-cas: '

    def format(self, record: std_logging.LogRecord) -> str:
        return self.prefix + ' '.join(record.getMessage().split())


def plain_log_lines(verb: str = '') -> None:
    """Give every handler oslo.log installed the :class:`PlainLine` form."""
    for handler in std_logging.getLogger().handlers:
        handler.setFormatter(PlainLine(verb))


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(prog, parser) of the application and of each verb, as documented."""
    application = OsBrickCas()
    yield application.NAME, application.parser
    for name, entry in sorted(application.command_manager):
        if name in ('help', 'complete'):
            continue
        prog = '%s %s' % (application.NAME, name)
        yield prog, entry.load()(application, None,
                                 cmd_name=name).get_parser(prog)


def main(argv: Optional[list[str]] = None) -> int:
    if not sys.warnoptions:
        warnings.simplefilter('ignore', DeprecationWarning)
        warnings.simplefilter('ignore', PendingDeprecationWarning)
    if 'debug' not in CONF:
        logging.register_options(CONF)
    config_args, rest = split_config_args(
        sys.argv[1:] if argv is None else argv)
    try:
        return OsBrickCas(config_args).run(rest)
    except Stop as stop:
        return stop.code


if __name__ == '__main__':
    sys.exit(main())
