"""`ddpkit test`: the seed's ddp.py done properly, run through `ddpkit launch` itself.

Like `launch`, it runs as one node's share, over ssh on every host (``--hosts``/``--hostfile``),
or from the master with a join token.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddpkit.cli.job.job_command import NODE, JobCommand, job_request, run_this_node
from ddpkit.cli.node.launch_options import (
    ShareContext,
    add_cluster_options,
    add_launch_options,
    config_from_args,
    with_master,
    with_scheduler_layout,
    without_peer_commands,
)
from ddpkit.cli.node.node_events import ConsoleEvents, show_plan
from ddpkit.cli.options import add_flag, add_json_flag, add_verbosity_flags
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.clustertest import WORKER_MODULE
from ddpkit.error_ids import JOB_FAILED, JOB_HUNG, JOB_STOPPED, JOB_TIMEOUT
from ddpkit.errors import DdpkitError, ExitCode
from ddpkit.i18n import _
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.outcomes import FAILED, OK, NodeOutcome, first_failure, job_summary, outcome_from_error
from ddpkit.report import document

HELP = _("check the cluster end to end: collectives, DDP and bandwidth in every rank")
_HEADINGS = {"check": _("check"), "detail": _("detail")}  # the verdict table's own columns


def configure(parser: argparse.ArgumentParser) -> None:
    add_launch_options(parser)
    add_cluster_options(parser)
    add_json_flag(parser)
    add_verbosity_flags(parser)
    parser.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto",
                        help=_("auto: NCCL when CUDA is present, Gloo otherwise"))
    parser.add_argument("--quick", action="store_true", help=_("small bandwidth sweep"))
    add_flag(parser, "--pg-timeout", type=float, default=120.0,
             help=_("process-group timeout inside the ranks (seconds, default 120)"))
    parser.add_argument("--show-output", action="store_true",
                        help=_("stream the ranks' own output (hidden by default)"))


@dataclasses.dataclass(frozen=True)
class TestOptions:
    """The test's own flags."""

    __test__ = False  # not a pytest class

    backend: str = "auto"  # auto | gloo | nccl (the parser's choices)
    quick: bool = False
    pg_timeout: float = 120.0
    show_output: bool = False


def run(args: argparse.Namespace, console: Console) -> int:
    args, notes = with_scheduler_layout(args, dict(os.environ))
    for note in notes:
        render.status(console, _("note: {text}", text=note))
    request = job_request(args)
    mode = request.mode()
    options = test_options(args)
    render_job = functools.partial(_render_job, as_json=request.as_json)
    if mode != NODE:
        from ddpkit.cli.job.whole_job import run_whole_job

        return run_whole_job(request, console, JOB, tail=job_tail(options),
                             hosts_tail=[*job_tail(options),
                                         *(["--show-output"] if options.show_output else [])],
                             own_config=lambda address: node_config(with_master(args, address)),
                             render_result=render_job)
    config, options = node_config(args)
    return run_this_node(request, console, JOB, config, options)


def test_options(args: argparse.Namespace) -> TestOptions:
    return TestOptions(backend=args.backend, quick=bool(args.quick), pg_timeout=args.pg_timeout,
                       show_output=bool(args.show_output))


def job_tail(options: TestOptions) -> list[str]:
    """The test's own flags, which every node's command repeats (not --show-output: a node's own
    choice)."""
    return ["--backend", options.backend, "--pg-timeout", f"{options.pg_timeout:g}",
            *(["--quick"] if options.quick else [])]


def node_config(args: argparse.Namespace) -> tuple[LaunchConfig, TestOptions]:
    """This node's configuration and test options from its parsed command line (also how a
    joining node reads the master's job)."""
    config = config_from_args(args, entry=WORKER_MODULE, entry_args=[], is_module=True)
    return config, test_options(args)


def share(console: Console, config: LaunchConfig, context: ShareContext,
          options: TestOptions) -> tuple[int, NodeOutcome]:
    """This node's share of the test: run the checks, print the verdict, return the exit code."""
    from ddpkit import clustertest
    from ddpkit.cli.torch_import import quiet_store_connector
    from ddpkit.launch.node import session

    # The run dir is decided first so the report directory can be passed to the worker.
    run_dir = Path(config.run_dir) if config.run_dir else session.default_run_dir(config, context.cwd)
    report_dir = run_dir / "test-report"
    # A rank stuck where the process-group timeout does not reach (Gloo's connect loop) must not
    # hang the test: past this deadline the job is stopped and the stage files name the stuck ranks.
    job_timeout = config.job_timeout or clustertest.default_job_timeout(options.pg_timeout)
    config = dataclasses.replace(
        config, run_dir=str(run_dir), entry=WORKER_MODULE, is_module=True, job_timeout=job_timeout,
        entry_args=tuple(clustertest.worker_args(report_dir, backend=options.backend,
                                                 quick=options.quick,
                                                 pg_timeout=options.pg_timeout)))
    peer = ["test", *job_tail(options)]
    plan = session.prepare(config, context.env, home=context.home, cwd=context.cwd,
                           python=context.python, peer_command=tuple(peer))
    if context.hide_peer_commands:
        plan = without_peer_commands(plan)
    outcome = NodeOutcome(node_rank=config.node_rank, host=plan.hostname, state=OK)
    if context.dry_run:
        show_plan(console, plan, as_json=context.as_json)
        return 0, outcome
    events = ConsoleEvents(console, output_to_stderr=True, quiet_output=not options.show_output)
    events.planned(plan)
    launch_error: DdpkitError | None = None
    try:
        session.execute(plan, events, should_stop=context.should_stop,
                        stack_request=context.stack_request,
                        store_connector=quiet_store_connector(console.verbosity),
                        running=functools.partial(clustertest.progress_line, report_dir))
    except DdpkitError as exc:
        if exc.error_id not in (JOB_FAILED, JOB_TIMEOUT, JOB_STOPPED, JOB_HUNG):
            raise
        launch_error = exc
    verdict = clustertest.read_verdict(report_dir)
    if context.as_json:
        payload = verdict.to_dict()
        payload["interface"] = plan.interface.ifname
        payload["run_dir"] = str(run_dir)
        if launch_error is not None:
            payload["launch_error"] = launch_error.to_dict()
        render.emit_json(console, document("test", 1, payload))
    else:
        _print_verdict(console, verdict)
    if launch_error is not None:
        render.status(console, launch_error.message, keep=True)
        render.wrapped(console, _("fix: {hint}", hint=launch_error.hint), first="  ",
                       indent="       ", to_err=True, keep=True)
        failed = outcome_from_error(launch_error.to_dict(), node_rank=config.node_rank,
                                    host=plan.hostname)
        return int(launch_error.exit_code), failed
    if not verdict.ok:
        return ExitCode.FAILURE, dataclasses.replace(outcome, state=FAILED, error_id="checks-failed",
                                                     message=verdict.headline())
    return ExitCode.OK, outcome


def _print_verdict(console: Console, verdict: Any) -> None:
    headers, rows = verdict.rows()
    if verdict.ranks:
        render.table(console, [_HEADINGS.get(h, h) for h in headers], rows)
        render.line(console)
    render.line(console, verdict.headline())  # one line, as users quote it (zh fits 80 too)


def _render_job(console: Console, outcomes: Sequence[NodeOutcome], payload: dict[str, Any], *,
                as_json: bool) -> int:
    """The fan-out's result: node 0's verdict (it holds the whole job's report), then the job."""
    from ddpkit.clustertest import TestVerdict

    doc = next((o.document for o in outcomes if o.document and "ranks" in o.document), None)
    failure = first_failure(outcomes)
    if as_json:
        body = {k: v for k, v in (doc or {}).items() if k not in ("schema", "ddpkit_version")}
        body.update({"ok": failure is None and bool(body.get("ok")), "job": payload})
        render.emit_json(console, document("test", 1, body))
    elif doc is not None:
        stages = {int(k): str(v) for k, v in dict(doc.get("stages", {})).items()}
        verdict = TestVerdict(ok=bool(doc.get("ok")), nodes=doc.get("nodes"),
                              ranks_per_node=doc.get("ranks_per_node"),
                              world_size=doc.get("world_size"), ranks=tuple(doc.get("ranks", [])),
                              missing_ranks=tuple(doc.get("missing_ranks", [])), stages=stages,
                              complete=bool(doc.get("complete")))
        _print_verdict(console, verdict)
    if failure is not None:
        render.status(console, _("job failed: {summary}", summary=job_summary(outcomes)),
                      keep=True)
        return ExitCode.JOB_FAILED
    return ExitCode.OK if doc is not None and doc.get("ok") else ExitCode.FAILURE


JOB: JobCommand[TestOptions] = JobCommand("test", node_config, share)
