"""The command table and each command's parser: the one place a command name becomes its module.

Each subcommand lives in ``ddpkit.cli.commands.<name>`` and has the same shape::

    HELP = "one line"
    def configure(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace, console: Console) -> int: ...

and a whole-job command (launch, test, bench, doctor) also has ``JOB``, its
:class:`~ddpkit.cli.job.job_command.JobCommand`. A module is found by name through :data:`COMMANDS`
(``importlib``), never imported here: only the chosen command's module is loaded, so a command
that does not need torch never pays for importing it, and code that needs "the command named X"
(the entry, a joining node) depends on this table, not on every command.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any, Protocol, cast

from ddpkit.cli.output.console import Console
from ddpkit.cli.output.help_format import HelpFormatter
from ddpkit.errors import UsageError
from ddpkit.i18n import LANGUAGES, Text, _, _n, current_language
from ddpkit.wording import commas

# name -> (module, one-line summary). Order is the order `ddpkit --help` shows.
COMMANDS: dict[str, tuple[str, Text]] = {
    "nics": ("ddpkit.cli.commands.nics",
        _("list network interfaces and pick the one for inter-node traffic")),
    "nccl-conf": ("ddpkit.cli.commands.nccl_conf",
        _("show or persist NCCL settings (nccl.conf)")),
    "launch": ("ddpkit.cli.commands.launch",
        _("run this node's share of a multi-node job via torchrun")),
    "test": ("ddpkit.cli.commands.test",
        _("check a cluster end to end with a shipped DDP test program")),
    "doctor": ("ddpkit.cli.commands.doctor",
        _("preflight checks, or diagnose a failed run from its logs")),
    "bench": ("ddpkit.cli.commands.bench",
        _("measure collectives, raw TCP and DDP scaling on this cluster")),
    "plan": ("ddpkit.cli.commands.plan",
        _("predict whether multi-node pays off for a model and network")),
    "stacks": ("ddpkit.cli.commands.stacks",
        _("every rank's Python stack of a running job (py-spy)")),
    "join": ("ddpkit.cli.commands.join",
        _("join a job started on the master with a ddpk:// token")),
    "explain": ("ddpkit.cli.commands.explain",
        _("explain an error id or a doctor finding id, offline")),
    "sim": ("ddpkit.cli.commands.sim",
        _("a simulated multi-node cluster in network namespaces (root)")),
}


class CommandModule(Protocol):
    HELP: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, console: Console) -> int: ...


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors go through the one error path."""

    console: Console | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        # argparse's own words, in ddpkit's catalogue (argparse's are not translated).
        self._positionals.title = _("positional arguments")
        self._optionals.title = _("options")
        for action in self._actions:
            if action.dest == "help":
                action.help = _("show this help and exit")

    def _print_message(self, message: str, file: object = None) -> None:
        # Help and usage go to stdout: the command's console, or (for subcommand parsers made by
        # add_subparsers, which have none) the process's stdout.
        if message:
            (self.console.out if self.console is not None else sys.stdout).write(message)

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # argparse turns a type function's translated message into "argument X: ..." with %,
        # which keeps only its English: say it here, with the message still a Text.
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as exc:
            if not isinstance(exc.message, Text):
                raise
            flag = "/".join(action.option_strings) or action.metavar or action.dest
            self.error(_("argument {flag}: {problem}", flag=flag, problem=exc.message))

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError("bad-usage",
                         _("{prog}: {problem}", prog=self.prog, problem=self._plain(message)),
                         _("see `{prog} --help`", prog=self.prog))

    def _plain(self, message: str) -> str:
        """argparse's message in ddpkit's words (and catalogue): "required: script, script_args"
        says what is missing in the words of the help; the other common ones are templates."""
        prefix = "the following arguments are required: "
        if not message.startswith(prefix):
            return _argparse_message(message)
        positionals = {a.dest: a for a in self._actions if not a.option_strings}
        missing: list[str] = []
        for name in (n.strip() for n in message[len(prefix):].split(",")):
            action = positionals.get(name)
            if action is not None and action.nargs == argparse.REMAINDER:
                continue  # "the rest of the line" is never what a user forgot
            missing.append(_("{name} ({help})", name=name, help=action.help)
                           if action is not None and action.help else name)
        what = commas(missing)
        if "script" in positionals:
            return _n("{what} is required; e.g. `{prog} train.py`",
                      "{what} are required; e.g. `{prog} train.py`", len(missing), what=what,
                      prog=self.prog)
        return _n("{what} is required", "{what} are required", len(missing), what=what)


# argparse's own messages (Lib/argparse.py, gettext'd in the "messages" domain, which ddpkit does
# not ship): the common ones, read back into ddpkit's templates.
_ARGPARSE_MESSAGES: tuple[tuple[re.Pattern[str], Text], ...] = (
    (re.compile(r"unrecognized arguments: (?P<args>.*)"),
     _("unrecognized arguments: {args}")),
    (re.compile(r"argument (?P<flag>\S+): invalid choice: (?P<value>.*?) \(choose from (?P<choices>.*)\)"),
     _("argument {flag}: invalid choice: {value} (choose from {choices})")),
    (re.compile(r"argument (?P<flag>\S+): expected one argument"),
     _("argument {flag}: expected one argument")),
    (re.compile(r"argument (?P<flag>\S+): expected at least one argument"),
     _("argument {flag}: expected at least one argument")),
    (re.compile(r"argument (?P<flag>\S+): invalid (?P<kind>\w+) value: (?P<value>.*)"),
     _("argument {flag}: invalid {kind} value: {value}")),
    (re.compile(r"argument (?P<flag>\S+): not allowed with argument (?P<other>\S+)"),
     _("argument {flag}: not allowed with argument {other}")),
)


def _argparse_message(message: str) -> str:
    for pattern, template in _ARGPARSE_MESSAGES:
        if (found := pattern.fullmatch(message)) is not None:
            return Text(template.template, **found.groupdict())
    return message


def load_command(name: str) -> CommandModule:
    module_name, _summary = COMMANDS[name]
    return cast(CommandModule, importlib.import_module(module_name))


def build_parser(
    name: str, console: Console | None = None, argv: Sequence[str] = ()
) -> tuple[argparse.ArgumentParser, CommandModule]:
    """The command's parser, ready for ``argv``: a command may add options that depend on the line
    (``extend_parser``: launch reads torchrun flags newer than its list from the installed torch)."""
    module = load_command(name)
    parser = Parser(prog=f"ddpkit {name}", description=module.HELP,
                     epilog=getattr(module, "EXAMPLES", None))
    parser.console = console
    module.configure(parser)
    extend = getattr(module, "extend_parser", None)
    if extend is not None:
        extend(parser, argv)
    parser.add_argument("--lang", choices=LANGUAGES, default=current_language(),
                        help=_("the language of ddpkit's messages (default: from LANGUAGE, LC_ALL, "
                               "LC_MESSAGES or LANG; --json is always English)"))
    return parser, module


