"""``ddpkit doctor``: preflight checks of this node, ``--log FILE...`` diagnosis of a failed run,
or cluster mode (``--nnodes N --node-rank R --master-addr A`` on every node).

The ``--log`` path and the local preflight never import torch; cluster mode does (torch's c10d
TCPStore is where the nodes meet), once per node.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ddpkit.cli.job.job_command import JobCommand
from ddpkit.cli.node.launch_options import ShareContext, add_cluster_options
from ddpkit.cli.options import add_flag, add_json_flag, add_verbosity_flags
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.cli.output.width import display_width, elide
from ddpkit.errors import ExitCode, UsageError
from ddpkit.i18n import _, _n, localized
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.outcomes import OK, NodeOutcome
from ddpkit.net.ports import DEFAULT_MASTER_PORT, is_tcp_port
from ddpkit.plain_text import CUT as MARKER
from ddpkit.report import document

if TYPE_CHECKING:
    from ddpkit.doctor.cluster.report import ClusterReport
    from ddpkit.doctor.cluster.session import ClusterOptions

HELP = _("preflight checks, or diagnose a failed run from its logs")
SCHEMA_KIND, SCHEMA_VERSION = "doctor", 1
LARGE_LOG_BYTES = 100_000_000  # a log this big takes seconds to read: doctor says it reads it
EVIDENCE_PLACE_COLUMNS = 36  # at most this much of an evidence line for its file:line
_SEVERITY_STYLE = {"error": "error", "warning": "warn", "info": "ok", "pass": "ok", "warn": "warn",
                   "fail": "error"}
_SEVERITY_WORD = {"error": _("error"), "warning": _("warning"), "info": _("info"),
                  "pass": _("pass"), "warn": _("warn"), "fail": _("fail")}


def _severity(console: Console, severity: str) -> str:
    """A finding's or check's severity, padded to one column width, in its colour."""
    word = _("{severity:<8}", severity=_SEVERITY_WORD.get(severity, severity))
    return render.style(console, word, _SEVERITY_STYLE[severity])


def configure(parser: argparse.ArgumentParser) -> None:
    add_flag(
        parser,
        "--log",
        nargs="+",
        action="extend",
        metavar="FILE",
        help=_("diagnose these logs of a failed or hung run (NCCL_DEBUG=INFO output, torchrun "
               "tracebacks, several nodes' files together); - reads standard input"),
    )
    add_flag(parser, "--master-addr", metavar="ADDR",
             help=_("preflight: also check the route to the master; cluster mode: node 0's "
                    "address, where the nodes meet"))
    add_flag(parser, "--master-port", metavar="PORT", type=int, default=DEFAULT_MASTER_PORT,
             help=_("preflight: the master port to check; cluster mode: the port the nodes "
                    "meet on, free on node 0 (default 29500)"))
    add_flag(parser, "--nnodes", metavar="N", type=int, default=None,
             help=_("cluster mode: run the same command on all N nodes; they check each other "
                    "(all-pairs reachability per interface, versions and settings side by "
                    "side)"))
    add_flag(parser, "--node-rank", metavar="R", type=int, default=None,
             help=_("cluster mode: this node's rank, 0 = the master (default 0)"))
    add_flag(parser, "--timeout", metavar="SECONDS", type=float, default=30.0,
             help=_("cluster mode: the whole check ends within this many seconds; nodes must "
                    "show up in the first TIMEOUT-7 (default 30)"))
    add_cluster_options(parser)
    add_json_flag(parser)
    add_verbosity_flags(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    whole_job = bool(args.hosts or args.hostfile)
    if args.nnodes is not None or args.node_rank is not None or whole_job:
        if args.log:
            raise UsageError("bad-usage", _("--log cannot be combined with --nnodes/--node-rank"),
                             _("diagnose logs with `ddpkit doctor --log FILE...` alone"))
        from ddpkit.cli.job import doctor_job
        from ddpkit.cli.job.job_command import NODE, job_request
        from ddpkit.cli.node.launch_options import with_master

        request = job_request(args)
        mode = request.mode()
        if mode != NODE:
            from ddpkit.cli.job.whole_job import run_whole_job

            return run_whole_job(
                request, console, JOB, tail=doctor_job.tail(args.timeout),
                own_config=lambda address: node_config(with_master(args, address)),
                render_result=lambda c, outcomes, payload: doctor_job.render_job(
                    c, outcomes, payload, as_json=request.as_json))
        return _run_cluster(args, console)
    if args.log:
        return _run_logs(args.log, console, as_json=args.json)
    return _run_preflight(console, args.master_addr, args.master_port, as_json=args.json)


def _run_logs(paths: Sequence[str], console: Console, *, as_json: bool) -> int:
    from ddpkit.doctor.findings import has_errors
    from ddpkit.doctor.log.diagnose import read_verdict

    _say_what_is_read(console, paths)
    verdict = read_verdict(paths, stdin=sys.stdin.buffer if "-" in paths else None)
    findings = list(verdict.findings)
    if as_json:  # "diagnosis": the top finding and the rank it names, as launch's summary has it
        render.emit_json(console, document(SCHEMA_KIND, SCHEMA_VERSION,
                                           {"findings": [f.to_dict() for f in findings],
                                            "diagnosis": verdict.to_dict()}))
    else:
        for finding in findings:
            head = _severity(console, finding.severity)
            render.line(console, _("{head} {id}  {title}", head=head,
                                   id=render.style(console, finding.id, "bold"),
                                   title=finding.title))
            # its words cite lines as (path:line); torchrun's --log-dir paths run deep
            render.wrapped(console, finding.explanation, first="  ", break_paths=True)
            if finding.evidence:
                render.line(console, _("  evidence:"))
                for item in finding.evidence:  # the line's words matter more than its path
                    render.clipped(console, f"    {_place(item.file, item.line)}: {item.text}")
            render.line(console, _("  fix:"))
            for text in localized(finding.fix).splitlines():  # a Text splits as English
                if text.startswith(" "):  # a command to paste: kept whole
                    render.command(console, text.strip(), indent="    " + text[:-len(text.lstrip())])
                else:
                    render.wrapped(console, text, first="    ", indent="      ")
            render.line(console)
        errors = sum(1 for f in findings if f.severity == "error")
        warnings = sum(1 for f in findings if f.severity == "warning")
        top = findings[0].id if findings else "no-failure"
        render.result(console, _("doctor: {errors} error(s), {warnings} warning(s) in {logs} "
                                 "log(s); most likely cause: {top}", errors=errors,
                                 warnings=warnings, logs=len(paths), top=top))
    return int(ExitCode.FAILURE if has_errors(findings) else ExitCode.OK)


def _say_what_is_read(console: Console, paths: Sequence[str]) -> None:
    """A wait the reading may take, said before it starts: standard input that is a terminal
    (nothing comes until the user pastes a log and ends it), or a log big enough to take
    seconds (about 10 MB/s where every line is NCCL's, benchmarks/doctor_logscan.py)."""
    for path in paths:
        if path == "-":
            if sys.stdin.isatty():
                render.status(console, _("reading a log from standard input, which is this "
                                         "terminal: paste the log, then press Ctrl-D (or pipe a "
                                         "log in: ... | ddpkit doctor --log -)"),
                              prefix="doctor: ", keep=True)
            continue
        try:
            info = os.stat(path)
        except OSError:
            continue  # (read_verdict names the cause)
        if stat.S_ISREG(info.st_mode) and info.st_size >= LARGE_LOG_BYTES:
            render.log(console, _("doctor: reading {path} ({size} MB)...", path=path,
                                  size=info.st_size // 1_000_000))


def _place(path: str, line: int) -> str:
    """An evidence line's file:line in at most EVIDENCE_PLACE_COLUMNS: a long path keeps its file
    name (``…/name.log:12``), so the rest of the line is left for the words that matter."""
    place = f"{path}:{line}"
    if display_width(place) <= EVIDENCE_PLACE_COLUMNS:
        return place
    return elide(f"{MARKER}/{os.path.basename(path)}:{line}", EVIDENCE_PLACE_COLUMNS)


def _run_preflight(console: Console, master_addr: str | None, master_port: int, *,
                   as_json: bool) -> int:
    import os

    from ddpkit.doctor.checks.facts import collect_local_facts
    from ddpkit.doctor.checks.local import local_rows
    from ddpkit.doctor.checks.model import worst
    from ddpkit.doctor.checks.network import network_checks

    if not is_tcp_port(master_port):
        raise UsageError("bad-port", _("--master-port {port} is not a port number",
                                       port=master_port),
                         _("give a port between 1 and 65535, e.g. --master-port 29500"))
    env = dict(os.environ)
    network = network_checks(env, master_addr)
    rows = network.rows + local_rows(collect_local_facts(master_port), env, network.interface)
    if as_json:
        render.emit_json(console, document(SCHEMA_KIND, SCHEMA_VERSION,
                                           {"checks": [row.to_dict() for row in rows]}))
    else:
        table = [(row.title, render.style(console, _SEVERITY_WORD.get(row.status, row.status),
                                          _SEVERITY_STYLE[row.status]),
                  row.detail) for row in rows]
        render.table(console, (_("check"), _("status"), _("detail")), table,
                     title=_("ddpkit doctor: this node"))
        fixes = [row for row in rows if row.status != "pass" and row.fix]
        if fixes:
            render.line(console)
            render.line(console, _("fixes:"))
            for row in fixes:
                render.wrapped(console, _("{id}: {fix}", id=row.id, fix=row.fix), first="  ",
                               indent="    ")
        render.result(console, _("doctor: {worst} ({failed} failed, {warnings} warnings); "
                                 "diagnose a failed run with: ddpkit doctor --log FILE...",
                                 worst=_SEVERITY_WORD.get(worst(rows), worst(rows)),
                                 failed=sum(r.status == "fail" for r in rows),
                                 warnings=sum(r.status == "warn" for r in rows)))
    return int(ExitCode.FAILURE if worst(rows) == "fail" else ExitCode.OK)


def _run_cluster(args: argparse.Namespace, console: Console) -> int:
    from ddpkit.cli.job.job_command import job_request, run_this_node

    if args.nnodes is None:
        raise UsageError("bad-usage", _("--node-rank needs --nnodes"),
                         _("give the number of nodes, e.g. --nnodes 2 --node-rank 1"))
    config, options = node_config(args)
    return run_this_node(job_request(args), console, JOB, config, options)


def node_config(args: argparse.Namespace) -> tuple[LaunchConfig, ClusterOptions]:
    """The cluster check's shape as a node configuration (the job drivers pass one around;
    nothing here runs torchrun) and its own options."""
    from ddpkit.doctor.cluster.session import ClusterOptions, validate

    options = ClusterOptions(args.nnodes, args.node_rank or 0, args.master_addr or "",
                             args.master_port, args.timeout)
    validate(options)  # a bad flag is its own usage error, before anything else
    config = LaunchConfig(nnodes=options.nnodes, node_rank=options.node_rank,
                          master_addr=options.master_addr, master_port=options.master_port,
                          entry="ddpkit doctor")
    return config, options


def share(console: Console, config: LaunchConfig, context: ShareContext,
          base: ClusterOptions) -> tuple[int, NodeOutcome]:
    """This node's part of the cluster check: meet the others, probe, report."""
    import socket
    import time

    from ddpkit.cli.torch_import import import_torch
    from ddpkit.doctor.cluster.report import SCHEMA_KIND as CLUSTER_KIND
    from ddpkit.doctor.cluster.report import SCHEMA_VERSION as CLUSTER_VERSION
    from ddpkit.doctor.cluster.report import build_report, summary_line
    from ddpkit.doctor.cluster.session import ClusterOptions, run_node

    started = time.monotonic()
    render.log(console, _("doctor: node {rank}: loading torch, reading this node's interfaces, "
                          "versions and GPUs", rank=config.node_rank))
    import_torch(console.verbosity)  # the meeting's store; after the environment was read
    options = ClusterOptions(config.nnodes, config.node_rank, config.master_addr,
                             config.master_port, base.timeout_s, key=config.progress_key)
    outcome = run_node(options, dict(context.env), started=started,
                       progress=lambda text: render.log(console, _("doctor: {text}", text=text)))
    report = build_report(outcome)
    if context.as_json:
        render.emit_json(console, document(CLUSTER_KIND, CLUSTER_VERSION, report.to_dict()))
    else:
        _render_cluster(console, report)
    render.result(console, summary_line(report))
    # The check's answer is the report (and the exit code), not a failure of the job: a node
    # that found a problem still finished its part.
    state = NodeOutcome(node_rank=config.node_rank, host=socket.gethostname(), state=OK)
    return int(ExitCode.OK if report.ok else ExitCode.FAILURE), state


def _render_at_scale(console: Console, report: ClusterReport) -> None:
    """Many nodes: nodes grouped by interface names, reachability by exception (--json: all)."""
    from ddpkit.doctor.cluster.summary import (
        compact_ranks,
        node_groups,
        probe_figures,
        probe_line,
        reach_rows,
    )

    rows = node_groups((r.rank, [c.ifname for c in r.candidates]) for r in report.records)
    if report.missing:
        rows.append((compact_ranks(report.missing), _("(did not show up)")))
    render.table(console, (_("nodes"), _("candidate interfaces")), rows,
                 title=_("nodes, grouped by interface names (addresses: --json)"))
    if report.missing:
        return
    render.line(console)
    render.table(console, (_("interfaces"), _("from nodes"), _("result")),
                 reach_rows(report.matrix.results()),
                 title=_("reachability, nodes with the same result on one row (every path: "
                         "--json)"))
    render.wrapped(console, probe_line(probe_figures(report.matrix, report.records)), first="", indent="  ")


def _render_cluster(console: Console, report: ClusterReport) -> None:
    from ddpkit.doctor.cluster.report import difference_table, matrix_table, verdict_lines
    from ddpkit.doctor.cluster.summary import SCALE_NODES, shown_problems

    out = report.outcome
    render.line(console, render.style(
        console, _n("ddpkit doctor: cluster of {count} node, master {master}, this is node {rank}",
                    "ddpkit doctor: cluster of {count} nodes, master {master}, this is node "
                    "{rank}", out.nnodes, master=out.master, rank=out.node_rank), "bold"))
    render.line(console)
    if len(report.records) > SCALE_NODES:
        _render_at_scale(console, report)
    else:
        nodes: list[tuple[str, str, str]] = [
            (f"node{r.rank}", r.hostname,
             ", ".join(f"{c.ifname} {c.address}" for c in r.candidates) or _("none"))
            for r in report.records]
        nodes += [(f"node{rank}", _("(did not show up)"), "") for rank in report.missing]
        render.table(console, (_("node"), _("hostname"), _("candidate interfaces")),
                     sorted(nodes), title=_("nodes"))
        if not report.missing:
            render.line(console)
            headers, rows = matrix_table(report)
            render.table(console, headers, rows, title=_(
                "reachability (row dials column; ok = that node answered and saw the intended "
                "source address)"))
    render.line(console)
    if report.differences:
        headers, rows = difference_table(report)
        render.table(console, headers, rows, title=_("differences between the nodes"))
    else:
        render.line(console, _("differences between the nodes: none"))
    if report.problems:
        render.line(console)
        render.line(console, render.style(console, _("problems"), "bold"))
        indexes, more = (shown_problems([p.id for p in report.problems])
                         if len(report.records) > SCALE_NODES
                         else (list(range(len(report.problems))), {}))
        for problem in (report.problems[i] for i in indexes):
            head = _severity(console, problem.severity)
            render.line(console, _("{head} {id}", head=head,
                                   id=render.style(console, problem.id, "bold")))
            render.wrapped(console, problem.message, first="  ")
            render.wrapped(console, _("fix: {fix}", fix=problem.fix), first="  ")
        for problem_id, count in sorted(more.items()):
            render.wrapped(console, _n("... and {count} more {id} problem (every one in --json)",
                                       "... and {count} more {id} problems (every one in --json)",
                                       count, id=problem_id), first="")
    render.line(console)
    render.line(console, render.style(console, _("verdict"), "bold"))
    for text in verdict_lines(report.verdict):
        render.line(console, _("  {line}", line=text) if text else "")


JOB: JobCommand[ClusterOptions] = JobCommand("doctor", node_config, share)
