"""`ddpkit stacks RUN_DIR...`: every rank's Python stack of a running job, from another terminal.

Reads the ranks that `ddpkit launch` recorded in ``<run dir>/ranks.json`` (pid and start time,
so a reused pid is never read) and dumps each with ``py-spy dump``. Nothing is written and the
job is not touched: py-spy pauses a rank for the few milliseconds it takes to read its stack.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ddpkit.cli.options import add_flag, add_json_flag
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import ConfigError, ExitCode
from ddpkit.i18n import _
from ddpkit.launch.hang.pyspy import DUMP_TIMEOUT_S, find_py_spy
from ddpkit.launch.hang.stacks import render_stack, summary_lines
from ddpkit.launch.hang.watcher import dump_run_dirs
from ddpkit.report import document

HELP = _("every rank's Python stack of a running job (py-spy)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help=_("a running job's run directory (one per node on a shared disk)"))
    add_flag(parser, "--timeout", type=float, default=DUMP_TIMEOUT_S,
             help=_("seconds py-spy may take per rank (default {seconds:g})",
                    seconds=DUMP_TIMEOUT_S))
    add_json_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    py_spy = find_py_spy(dict(os.environ), sys.executable)
    stacks = dump_run_dirs([Path(d) for d in args.run_dirs], py_spy, timeout=args.timeout)
    if all(s.error_id == "rank-exited" for s in stacks):
        raise ConfigError("job-not-running",
                          _("no rank recorded in {run_dirs} is running any more",
                            run_dirs=", ".join(args.run_dirs)),
                          _("the job has ended: its logs and any stacks it dumped are in the run "
                            "directory (`ddpkit doctor --log RUN_DIR`)"))
    lines = summary_lines(stacks)
    if args.json:
        render.emit_json(console, document("stacks", 1, {
            "run_dirs": list(args.run_dirs), "summary": lines,
            "stacks": [s.to_dict() for s in stacks]}))
    else:
        for line in lines:
            render.line(console, line)
        for stack in stacks:
            render.line(console)
            render.line(console, render_stack(stack).rstrip("\n"))
    return int(ExitCode.OK if stacks and all(s.ok for s in stacks) else ExitCode.FAILURE)
