"""``ddpkit doctor``: preflight checks of this node, or ``--log FILE...`` diagnosis of a failed run.

The ``--log`` path never imports torch: it only reads text.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence

from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.options import add_flag, add_json_flag
from ddpkit.errors import ExitCode
from ddpkit.report import document

HELP = "preflight checks, or diagnose a failed run from its logs"
SCHEMA_KIND, SCHEMA_VERSION = "doctor", 1
_WIDTH = 100
_SEVERITY_STYLE = {"error": "error", "warning": "warn", "info": "ok", "pass": "ok", "warn": "warn",
                   "fail": "error"}


def configure(parser: argparse.ArgumentParser) -> None:
    add_flag(
        parser,
        "--log",
        nargs="+",
        action="extend",
        metavar="FILE",
        help="diagnose these logs of a failed or hung run (NCCL_DEBUG=INFO output, torchrun "
        "tracebacks, several nodes' files together); - reads standard input",
    )
    add_json_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.log:
        return _run_logs(args.log, console, as_json=args.json)
    return _run_preflight(console, as_json=args.json)


def _run_logs(paths: Sequence[str], console: Console, *, as_json: bool) -> int:
    from ddpkit.doctor.findings import has_errors
    from ddpkit.doctor.logs import diagnose

    findings = diagnose(paths, stdin=sys.stdin.buffer if "-" in paths else None)
    if as_json:
        render.emit_json(console, document(SCHEMA_KIND, SCHEMA_VERSION,
                                           {"findings": [f.to_dict() for f in findings]}))
    else:
        for finding in findings:
            head = render.style(console, f"{finding.severity:<8}", _SEVERITY_STYLE[finding.severity])
            render.line(console, f"{head} {render.style(console, finding.id, 'bold')}  "
                        f"{finding.title}")
            for text in textwrap.wrap(finding.explanation, _WIDTH - 2):
                render.line(console, "  " + text)
            if finding.evidence:
                render.line(console, "  evidence:")
                for item in finding.evidence:
                    render.line(console, f"    {item.file}:{item.line}: {item.text}")
            render.line(console, "  fix:")
            for text in finding.fix.splitlines():
                render.line(console, "    " + text)
            render.line(console)
        errors = sum(1 for f in findings if f.severity == "error")
        warnings = sum(1 for f in findings if f.severity == "warning")
        top = findings[0].id if findings else "no-failure"
        render.log(console, f"doctor: {errors} error(s), {warnings} warning(s) in "
                   f"{len(paths)} log(s); most likely cause: {top}")
    return int(ExitCode.FAILURE if has_errors(findings) else ExitCode.OK)


def _run_preflight(console: Console, *, as_json: bool) -> int:
    from ddpkit.errors import UsageError

    raise UsageError(
        "bad-usage",
        "local preflight is not available yet",
        "diagnose a run's logs with: ddpkit doctor --log FILE...",
    )
