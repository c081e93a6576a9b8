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
from ddpkit.errors import ExitCode, UsageError
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
    add_flag(parser, "--master-addr", metavar="ADDR",
             help="preflight: also check the route to the master")
    add_flag(parser, "--master-port", metavar="PORT", type=int, default=29500,
             help="preflight: the master port to check (default 29500)")
    add_json_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.log:
        return _run_logs(args.log, console, as_json=args.json)
    return _run_preflight(console, args.master_addr, args.master_port, as_json=args.json)


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


def _run_preflight(console: Console, master_addr: str | None, master_port: int, *,
                   as_json: bool) -> int:
    import os

    from ddpkit.doctor.checks.facts import collect_local_facts
    from ddpkit.doctor.checks.local import local_rows
    from ddpkit.doctor.checks.model import worst
    from ddpkit.doctor.checks.network import network_checks

    if not 0 < master_port < 65536:
        raise UsageError("bad-usage", f"--master-port {master_port} is not a port number",
                         "give a port between 1 and 65535, e.g. --master-port 29500")
    env = dict(os.environ)
    network = network_checks(env, master_addr)
    rows = network.rows + local_rows(collect_local_facts(master_port), env, network.interface)
    if as_json:
        render.emit_json(console, document(SCHEMA_KIND, SCHEMA_VERSION,
                                           {"checks": [row.to_dict() for row in rows]}))
    else:
        table = [(row.title, render.style(console, row.status, _SEVERITY_STYLE[row.status]),
                  row.detail) for row in rows]
        render.table(console, ("check", "status", "detail"), table,
                     title="ddpkit doctor: this node")
        fixes = [row for row in rows if row.status != "pass" and row.fix]
        if fixes:
            render.line(console)
            render.line(console, "fixes:")
            for row in fixes:
                render.line(console, f"  {row.id}: {row.fix}")
        render.log(console, f"doctor: {worst(rows)} ({sum(r.status == 'fail' for r in rows)} "
                   f"failed, {sum(r.status == 'warn' for r in rows)} warnings); diagnose a failed "
                   "run with: ddpkit doctor --log FILE...")
    return int(ExitCode.FAILURE if worst(rows) == "fail" else ExitCode.OK)
