"""The entry: global flags, dispatch to the command named on the line (through
:mod:`ddpkit.cli.command_table`), and the one place exceptions become exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ddpkit import __version__
from ddpkit.cli.command_table import COMMANDS, build_parser
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import DdpkitError, ExitCode, UsageError


def _overview() -> str:
    width = max(len(name) for name in COMMANDS)
    rows = "\n".join(f"  {name.ljust(width)}  {summary}" for name, (_, summary) in COMMANDS.items())
    return (
        "usage: ddpkit [--version] [--traceback] COMMAND [options]\n\n"
        "Multi-node PyTorch training on rented GPU instances, right the first time.\n\n"
        f"commands:\n{rows}\n\n"
        "`ddpkit COMMAND --help` describes one command; every command takes --json."
    )


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
        console.verbosity = ("verbose" if getattr(args, "verbose", False) else
                             "quiet" if getattr(args, "quiet", False) else "normal")
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
    import traceback  # only on a crash: start-up does not pay for it

    render.log(console, traceback.format_exc().rstrip())


def entry() -> None:
    """Console-script entry point: the only ``sys.exit`` in ddpkit.

    When a store handshake is still running in a daemon thread (a bounded wait gave up on a
    silent or gone master), the process ends with ``os._exit`` after flushing its output: an
    interpreter shutdown around torch's C++ store client aborts the process instead of exiting
    with the code ddpkit chose (seen in CI: exit -6 instead of 130 after Ctrl-C)."""
    code = main()
    if "torch" in sys.modules:  # only then can a store client have been started
        from ddpkit.launch.store_client import handshakes_in_flight

        if handshakes_in_flight():
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    sys.exit(code)
