"""The command table, argument parsing, dispatch, and the one place exceptions become exit codes.

Each subcommand lives in ``ddpkit.cli.commands.<name>`` and has the same shape::

    HELP = "one line"
    def configure(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace, console: Console) -> int: ...

Only the chosen command's module is imported, so a command that does not need torch never pays
for importing it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, Protocol, cast

from ddpkit import __version__
from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.help_format import HelpFormatter
from ddpkit.errors import DdpkitError, ExitCode, UsageError

# name -> (module, one-line summary). Order is the order `ddpkit --help` shows.
COMMANDS: dict[str, tuple[str, str]] = {
    "nics": ("ddpkit.cli.commands.nics", "list network interfaces and pick the one for inter-node traffic"),
    "nccl-conf": ("ddpkit.cli.commands.nccl_conf", "show or persist NCCL settings (nccl.conf)"),
    "launch": ("ddpkit.cli.commands.launch", "run this node's share of a multi-node job via torchrun"),
    "test": ("ddpkit.cli.commands.test", "check a cluster end to end with a shipped DDP test program"),
    "doctor": ("ddpkit.cli.commands.doctor", "preflight checks, or diagnose a failed run from its logs"),
    "bench": ("ddpkit.cli.commands.bench", "measure collectives, raw TCP and DDP scaling on this cluster"),
    "plan": ("ddpkit.cli.commands.plan", "predict whether multi-node pays off for a model and network"),
    "stacks": ("ddpkit.cli.commands.stacks", "every rank's Python stack of a running job (py-spy)"),
    "join": ("ddpkit.cli.commands.join", "join a job started on the master with a ddpk:// token"),
    "sim": ("ddpkit.cli.commands.sim", "a simulated multi-node cluster in network namespaces (root)"),
}


class CommandModule(Protocol):
    HELP: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, console: Console) -> int: ...


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors go through the one error path."""

    console: Console | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file: object = None) -> None:
        # Help and usage go to stdout: the command's console, or (for subcommand parsers made by
        # add_subparsers, which have none) the process's stdout.
        if message:
            (self.console.out if self.console is not None else sys.stdout).write(message)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError("bad-usage", f"{self.prog}: {self._plain(message)}", f"see `{self.prog} --help`")

    def _plain(self, message: str) -> str:
        """argparse's "required: script, script_args" in the words of the help: what is missing."""
        prefix = "the following arguments are required: "
        if not message.startswith(prefix):
            return message
        positionals = {a.dest: a for a in self._actions if not a.option_strings}
        missing = []
        for name in (n.strip() for n in message[len(prefix):].split(",")):
            action = positionals.get(name)
            if action is not None and action.nargs == argparse.REMAINDER:
                continue  # "the rest of the line" is never what a user forgot
            missing.append(f"{name} ({action.help})" if action is not None and action.help else name)
        example = f"; e.g. `{self.prog} train.py`" if "script" in positionals else ""
        verb = "is" if len(missing) == 1 else "are"
        return f"{' and '.join(missing)} {verb} required{example}"


def _overview() -> str:
    width = max(len(name) for name in COMMANDS)
    rows = "\n".join(f"  {name.ljust(width)}  {summary}" for name, (_, summary) in COMMANDS.items())
    return (
        "usage: ddpkit [--version] [--traceback] COMMAND [options]\n\n"
        "Multi-node PyTorch training on rented GPU instances, right the first time.\n\n"
        f"commands:\n{rows}\n\n"
        "`ddpkit COMMAND --help` describes one command; every command takes --json."
    )


def load_command(name: str) -> CommandModule:
    module_name, _ = COMMANDS[name]
    return cast(CommandModule, importlib.import_module(module_name))


def build_parser(
    name: str, console: Console | None = None
) -> tuple[argparse.ArgumentParser, CommandModule]:
    module = load_command(name)
    parser = _Parser(prog=f"ddpkit {name}", description=module.HELP,
                     epilog=getattr(module, "EXAMPLES", None))
    parser.console = console
    module.configure(parser)
    return parser, module


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    """Run one ddpkit command; return its exit code. Never raises, never calls ``sys.exit``."""
    console = console or Console()
    args_in = list(sys.argv[1:] if argv is None else argv)
    show_traceback = False
    while args_in and args_in[0].startswith("-"):
        flag = args_in.pop(0)
        if flag in ("-h", "--help"):
            render.line(console, _overview())
            return ExitCode.OK
        if flag == "--version":
            render.line(console, f"ddpkit {__version__}")
            return ExitCode.OK
        if flag == "--traceback":
            show_traceback = True
            continue
        render.error(console, UsageError("bad-usage", f"unknown option {flag}", "see `ddpkit --help`"),
                     as_json=False)
        return ExitCode.USAGE
    if not args_in:
        render.line(console, _overview())
        return ExitCode.USAGE
    name = args_in.pop(0)
    if name not in COMMANDS:
        known = ", ".join(COMMANDS)
        exc = UsageError("unknown-command", f"no command named {name!r}", f"commands: {known}")
        render.error(console, exc, as_json=False)
        return ExitCode.USAGE

    as_json = "--json" in args_in
    try:
        parser, module = build_parser(name, console)
        try:
            args = parser.parse_args(args_in)
        except SystemExit as exit_request:  # --help inside a subcommand
            return int(exit_request.code or 0)
        as_json = bool(getattr(args, "json", False))
        return int(module.run(args, console))
    except DdpkitError as exc:
        if show_traceback:
            log_traceback(console)
        render.error(console, exc, as_json=as_json)
        return int(exc.exit_code)
    except KeyboardInterrupt as stop:
        render.log(console, f"interrupted: {stop}" if str(stop) else "interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.FAILURE
    except Exception as exc:  # noqa: BLE001 - the one place that turns crashes into a report
        if show_traceback:
            log_traceback(console)
        internal = DdpkitError(
            "internal-error",
            f"ddpkit crashed: {type(exc).__name__}: {exc}",
            "rerun with `ddpkit --traceback ...` and report the traceback",
        )
        render.error(console, internal, as_json=as_json)
        return ExitCode.FAILURE


def log_traceback(console: Console) -> None:
    render.log(console, traceback.format_exc().rstrip())


def entry() -> None:
    """Console-script entry point: the only ``sys.exit`` in ddpkit.

    When a store handshake is still running in a daemon thread (a bounded wait gave up on a
    silent or gone master), the process ends with ``os._exit`` after flushing its output: an
    interpreter shutdown around torch's C++ store client aborts the process instead of exiting
    with the code ddpkit chose (seen in CI: exit -6 instead of 130 after Ctrl-C)."""
    code = main()
    from ddpkit.launch.store_client import handshakes_in_flight

    if "torch" in sys.modules and handshakes_in_flight():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
