"""The entry: global flags, dispatch to the command named on the line (through
:mod:`ddpkit.cli.command_table`), and the one place exceptions become exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from ddpkit import __version__
from ddpkit.cli.argparse_english import keep_argparse_english
from ddpkit.cli.command_table import COMMANDS, build_parser
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import DdpkitError, ExitCode, UsageError
from ddpkit.i18n import LANGUAGES, Language, _, language_from_environment, localized, use_language


def _overview(console: Console) -> None:
    render.line(console, _("usage: ddpkit [--version] [--traceback] [--lang zh|en] COMMAND [options]"))
    render.line(console)
    render.wrapped(console, _("Multi-node PyTorch training on rented GPU instances, right the "
                              "first time."), indent="")
    render.line(console)
    render.line(console, _("commands:"))
    width = max(len(name) for name in COMMANDS)
    for name, (_module, summary) in COMMANDS.items():
        render.wrapped(console, localized(summary), first="  " + name.ljust(width) + "  ",
                       indent=" " * (width + 4))
    render.line(console)
    render.wrapped(console, _("`ddpkit COMMAND --help` describes one command; every command "
                              "takes --json."), indent="")


def language_asked(args: Sequence[str], environ: Mapping[str, str]) -> Language:
    """The language of this run: ``--lang zh|en`` anywhere before a ``--`` (the help is built
    before the command's flags are parsed), else the locale variables."""
    for index, arg in enumerate(args):
        if arg == "--":
            break
        value = (arg.split("=", 1)[1] if arg.startswith("--lang=") else
                 args[index + 1] if arg == "--lang" and index + 1 < len(args) else None)
        if value in LANGUAGES:
            return value
    return language_from_environment(environ)


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    """Run one ddpkit command; return its exit code. Never raises, never calls ``sys.exit``."""
    console = console or Console()
    keep_argparse_english()  # before any parser: its messages never follow LANGUAGE to a file
    args_in = list(sys.argv[1:] if argv is None else argv)
    use_language(language_asked(args_in, os.environ))
    show_traceback = False
    while args_in and args_in[0].startswith("-"):
        flag = args_in.pop(0)
        if flag in ("-h", "--help"):
            _overview(console)
            return ExitCode.OK
        if flag == "--version":
            render.line(console, _("ddpkit {version}", version=__version__))
            return ExitCode.OK
        if flag == "--traceback":
            show_traceback = True
            continue
        if flag == "--lang" and args_in and args_in[0] in LANGUAGES:
            args_in.pop(0)
            continue
        if flag.startswith("--lang=") and flag[len("--lang="):] in LANGUAGES:
            continue
        if flag == "--lang" or flag.startswith("--lang="):
            value = flag[len("--lang="):] if "=" in flag else args_in[0] if args_in else ""
            render.error(console, UsageError(
                "bad-usage", _("unknown language {value!r} for --lang", value=value) if value
                else _("--lang needs a language"),
                _("ddpkit speaks {languages}: --lang {languages}", languages="|".join(LANGUAGES))),
                as_json=False)
            return ExitCode.USAGE
        render.error(console, UsageError("bad-usage", _("unknown option {flag}", flag=flag),
                                        _("see `ddpkit --help`")),
                     as_json=False)
        return ExitCode.USAGE
    if not args_in:
        _overview(console)
        return ExitCode.USAGE
    name = args_in.pop(0)
    if name not in COMMANDS:
        known = ", ".join(COMMANDS)
        exc = UsageError("unknown-command", _("no command named {name!r}", name=name),
                         _("commands: {known}", known=known))
        render.error(console, exc, as_json=False)
        return ExitCode.USAGE

    as_json = "--json" in args_in
    try:
        parser, module = build_parser(name, console, args_in)
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
        render.log(console, _("interrupted: {what}", what=stop.args[0] if stop.args else str(stop))
                   if str(stop) else _("interrupted"))
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.FAILURE
    except Exception as exc:  # noqa: BLE001 - the one place that turns crashes into a report
        if show_traceback:
            log_traceback(console)
        internal = DdpkitError(
            "internal-error",
            _("ddpkit crashed: {kind}: {error}", kind=type(exc).__name__, error=str(exc)),
            _("rerun with `ddpkit --traceback ...` and report the traceback"),
        )
        render.error(console, internal, as_json=as_json)
        return ExitCode.FAILURE


def log_traceback(console: Console) -> None:
    import traceback  # only on a crash: start-up does not pay for it

    render.log(console, traceback.format_exc().rstrip())


def entry() -> None:
    """Console-script entry point: the only ``sys.exit`` in ddpkit.

    Once torch is imported and a daemon thread still runs (a store call or handshake whose
    deadline passed, a heartbeat, an output reader), the process ends without the interpreter's
    teardown, after its exit functions and a flush (:func:`ddpkit.launch.ending.end_now`): such
    a thread returning from torch's C++ during the teardown aborts the process (SIGABRT instead
    of the code ddpkit chose; seen in CI after Ctrl-C and after ``ddpkit join``'s summary)."""
    try:
        code = main()
    except BrokenPipeError:  # the reader went away (`ddpkit --help | head`): nothing to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet too
        code = ExitCode.FAILURE
    if "torch" in sys.modules:  # only then can a thread be inside torch's C++
        from ddpkit.launch.ending import daemon_threads_alive, end_now

        if daemon_threads_alive():
            end_now(code)  # returns only while a thread that is not a daemon still runs
    sys.exit(code)
