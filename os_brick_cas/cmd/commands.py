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

"""The verbs of ``os-brick-cas`` as cliff commands.

Every verb is registered in setup.cfg under the ``os_brick_cas.cli``
entry-point namespace. :class:`Operator` is what every verb shares (the
must-run-as-root line, this host's nova name, in-process privsep as root,
Ctrl-C); :class:`Report` adds cliff's output formatters (``-f table, json,
yaml, value, csv``) to the listing verbs; :class:`Verb` wraps a module's
argparse registration (``add_parser``/``register_subcommands``) into a
cliff command without changing the module.
"""

import argparse
import functools
import importlib
import os
import sys
from typing import Any, Callable, Iterable, Optional, Sequence

from cliff import command
from cliff import display
from oslo_privsep import daemon as privsep_daemon

from os_brick_cas.cmd import args as args_mod
from os_brick_cas.cmd import output

#: verbs that call casadm/rbd (root through privsep) on this host
ROOT_COMMANDS = frozenset(('status', 'doctor', 'flush', 'drain', 'undrain',
                           'owners', 'recover', 'discard', 'exporter',
                           'host'))


def must_be_root(verb: str) -> str:
    """The one-line error of a command run without root."""
    return ('os-brick-cas %s: must run as root (it calls casadm and rbd) '
            '(try: sudo os-brick-cas %s ... / docker exec -u root '
            'nova_compute os-brick-cas %s ...)' % (verb, verb, verb))


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


class Operator(command.Command):
    """What every verb shares around its own work."""

    def run(self, parsed_args: argparse.Namespace) -> int:
        verb = self.cmd_name or ''
        if verb.split(' ')[0] in ROOT_COMMANDS and os.geteuid() != 0:
            print(must_be_root(verb), file=sys.stderr)
            return 2
        args_mod.resolve_host(parsed_args)
        run_privileged_in_process_as_root()
        try:
            return self.run_verb(parsed_args)
        except privsep_daemon.FailedToDropPrivileges:
            # a privsep daemon could not start (sudo/rootwrap refused)
            print(must_be_root(verb), file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print('os-brick-cas %s: interrupted (Ctrl-C); "os-brick-cas '
                  'status" shows where each volume stands' % verb,
                  file=sys.stderr)
            return args_mod.EXIT_INTERRUPTED

    def run_verb(self, parsed_args: argparse.Namespace) -> int:
        return super().run(parsed_args)


class Report(Operator, display.DisplayCommandBase):
    """A listing verb; its output formats are cliff's formatter plugins.

    ``json`` and ``yaml`` print the verb's whole document, ``value`` and
    ``csv`` one row per line, ``table`` the verb's readable report when it
    has one (``text``), else cliff's table of the rows. ``-c`` picks
    columns (keys of the document). ``take_action`` returns the exit code.
    """

    formatter_namespace = 'cliff.formatter.list'
    formatter_default = 'table'

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        output.add_raw_argument(parser)
        return parser

    def run_verb(self, parsed_args: argparse.Namespace) -> int:
        self.formatter = self._formatter_plugins[parsed_args.formatter].obj
        return self.take_action(parsed_args)

    def emit(self, parsed_args: argparse.Namespace, document: dict,
             columns: Sequence[str], rows: Callable[[], Iterable[Sequence]],
             text: Optional[Callable[[], str]] = None) -> None:
        """Print *document*, *rows* or *text* as ``-f``/``-c`` ask."""
        fmt = parsed_args.formatter
        if fmt in ('json', 'yaml'):
            keys, selector = self._generate_columns_and_selector(
                parsed_args, list(document))
            self.formatter.emit_one(keys, [document[key] for key in keys],
                                    sys.stdout, parsed_args)
        elif fmt == 'table' and text is not None and not parsed_args.columns:
            sys.stdout.write(text())
        else:
            self.produce_output(parsed_args, columns, rows())

    def produce_output(self, parsed_args: argparse.Namespace,
                       column_names: Sequence[str], data: Any) -> int:
        names, selector = self._generate_columns_and_selector(
            parsed_args, column_names)
        if selector is not None:
            data = (list(self._compress_iterable(row, selector))
                    for row in data)
        self.formatter.emit_list(names, data, sys.stdout, parsed_args)
        return 0


class HostReport(Report):
    """A listing verb about this host: ``--host`` and ``report(args, emit)``.

    ``emit(document, columns, rows, text=None)`` is :meth:`Report.emit`
    for the parsed arguments; ``report`` returns the exit code.
    """

    report: Callable[[argparse.Namespace, Callable[..., None]], int]

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        args_mod.add_host_argument(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        return type(self).report(parsed_args,
                                 functools.partial(self.emit, parsed_args))


class _Into:
    """Stands in for argparse's subparsers while a module registers.

    The module's ``add_parser``/``register_subcommands`` fills the cliff
    command's parser for its verb (``words``: ``['host', 'plan']`` for a
    verb the module nests); its other verbs go to throw-away parsers.
    """

    def __init__(self, words: list[str],
                 parser: argparse.ArgumentParser) -> None:
        self.words, self.parser, self.help = words, parser, ''

    def add_parser(self, name: str, help: str = '', **kwargs: Any) -> Any:
        if name != self.words[0]:
            return argparse.ArgumentParser(add_help=False)
        if len(self.words) > 1:
            return _Level(self)
        self.help = help
        return self.parser


class _Level(argparse.ArgumentParser):
    """The parser of a verb's first word, whose subparsers hold the rest."""

    def __init__(self, into: _Into) -> None:
        super().__init__(add_help=False)
        self.into = into

    def add_subparsers(self, **kwargs: Any) -> Any:
        self.into.words = self.into.words[1:]
        return self.into


class Verb(Operator):
    """A verb whose module registers it on an argparse parser."""

    module = ''
    verb = ''

    @classmethod
    def available(cls) -> bool:
        """False where the verb's module cannot load (no nova/cinder)."""
        try:
            importlib.import_module(cls.module)
        except ImportError:
            return False
        return True

    def _register(self, parser: argparse.ArgumentParser) -> str:
        module = importlib.import_module(self.module)
        register = getattr(module, 'register_subcommands', None) or getattr(
            module, 'add_parser')
        into = _Into(self.verb.split(), parser)
        register(into)
        return into.help

    def get_description(self) -> str:
        return self._register(argparse.ArgumentParser(add_help=False))

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        self._register(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        return parsed_args.func(parsed_args)


class ReportVerb(Verb, Report):
    """A :class:`Verb` whose output takes ``-f``/``-c`` like a listing.

    The module's function gets ``args.emit(document, columns, rows,
    text=None)`` (:meth:`Report.emit`) and prints nothing else on stdout.
    """

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        parsed_args.emit = functools.partial(self.emit, parsed_args)
        return parsed_args.func(parsed_args)


def verb(module: str, name: str, base: type = Verb) -> type:
    """A *base* class for the verb *name* that *module* registers."""
    return type(name.title().replace('-', '').replace(' ', ''), (base,), {
        'module': module, 'verb': name, '__module__': __name__,
        '__doc__': 'os-brick-cas %s (registered by %s)' % (name, module)})


Demo = verb('os_brick_cas.cmd.demo', 'demo')
Flush = verb('os_brick_cas.cmd.flush', 'flush')
Drain = verb('os_brick_cas.cmd.drain', 'drain')
Undrain = verb('os_brick_cas.cmd.drain', 'undrain')
ReloadIoClasses = verb('os_brick_cas.cmd.io_classes', 'reload-io-classes')
Bench = verb('os_brick_cas.cmd.bench', 'bench', ReportVerb)
Exporter = verb('os_brick_cas.cmd.exporter', 'exporter')
HostPlan = verb('os_brick_cas.cmd.host', 'host plan', ReportVerb)
HostApply = verb('os_brick_cas.cmd.host', 'host apply', ReportVerb)
HostCheck = verb('os_brick_cas.cmd.host', 'host check', ReportVerb)
HostStop = verb('os_brick_cas.cmd.host_teardown', 'host stop', ReportVerb)
HostForget = verb('os_brick_cas.cmd.host_teardown', 'host forget',
                  ReportVerb)
HostInstallFiles = verb('os_brick_cas.cmd.install_files',
                        'host install-files')
#: the verbs that ask Cinder (types, fences, owners)
CINDER_ADMIN = 'os_brick_cas.cmd.cinder_admin'
TypeCreate = verb(CINDER_ADMIN, 'type-create')
TypeShow = verb(CINDER_ADMIN, 'type-show', ReportVerb)
FenceShow = verb(CINDER_ADMIN, 'fence-show', ReportVerb)
FenceClear = verb(CINDER_ADMIN, 'fence-clear')
Discard = verb(CINDER_ADMIN, 'discard')
Recover = verb(CINDER_ADMIN, 'recover')
NovaShim = verb('nova_ext.cmd', 'nova-shim')
