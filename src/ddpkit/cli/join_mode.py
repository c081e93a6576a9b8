"""Token mode on the master: `ddpkit launch|test|bench|doctor --nnodes N ...` without
--master-addr. The flags become a :class:`~ddpkit.launch.join.driver.JoinMasterJob`,
:mod:`ddpkit.launch.join.driver` runs it (the store, the token, the joins, every node's outcome),
and this module supplies node 0's own share, renders what the driver reports and how the job went.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.job_events import JobConsoleEvents, show_job_stacks
from ddpkit.cli.launch_options import ResultRenderer, Share, ShareContext, process_context
from ddpkit.errors import ExitCode, JobFailed
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.join import driver as join_driver
from ddpkit.launch.outcomes import NodeOutcome, job_summary
from ddpkit.launch.ssh.fanout import parse_document
from ddpkit.report import document


@contextlib.contextmanager
def interrupts_announced(announce: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C and SIGTERM first tell every node to stop (``announce``), then interrupt this one:
    the workers start their cleanup while node 0 does its own."""

    def handler(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(Exception):  # a failed announcement must not hide the interrupt
            announce()
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def node_config(command: str, args: argparse.Namespace) -> tuple[LaunchConfig, dict[str, Any]]:
    """A node's configuration and share options from its parsed ``command`` line."""
    if command == "test":
        from ddpkit.cli.commands import test

        return test.node_config(args)
    if command == "bench":
        from ddpkit.cli.commands import bench

        return bench.node_config(args)
    if command == "doctor":
        from ddpkit.cli.commands import doctor

        return doctor.node_config(args)
    from ddpkit.cli.commands import launch

    return launch.node_config(args)


def run_master(args: argparse.Namespace, console: Console, *, command: str, tail: list[str],
               share: Share, render_result: ResultRenderer | None = None) -> int:
    """``tail``: what every node's command ends with (the command's own flags, the entry).

    With --json the whole job is one document on stdout: node 0's own document is captured and
    attached to its outcome, and ``render_result`` (the same one the ssh fan-out uses) or, for
    launch, a ``<command>-job`` document lists every node."""
    from ddpkit.cli.hosts_mode import job_env, whole_job

    where = join_driver.advertised_address(args.ifname)
    env, home, cwd, python = process_context()
    job = join_driver.JoinMasterJob(
        job=whole_job(args, command, args.nnodes, tail), passed=job_env(args, env, cwd),
        cwd=str(cwd), where=where, join_port=args.join_port, join_timeout=args.join_timeout,
        token_file=Path(args.token_file) if args.token_file else None)
    if args.dry_run:
        _print_dry_run(console, job, command, tail, as_json=args.json)
        return 0
    # node 0's own configuration: a bad value fails here, before the job store starts
    config, options = node_config(command, argparse.Namespace(**{**vars(args),
                                                                 "master_addr": where.address}))
    config = dataclasses.replace(config, progress_key=job.progress_key)

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        context = ShareContext(env=join_driver.own_env(job, env), home=home, cwd=cwd,
                               python=python, as_json=args.json, should_stop=should_stop,
                               hide_peer_commands=True)
        captured = io.StringIO()  # with --json, node 0's document joins the job's one document
        node0_console = Console(out=captured, err=console.err, color=False) if args.json \
            else console
        code, own = share(node0_console, config, context, options)
        return code, dataclasses.replace(own, document=parse_document(captured.getvalue())
                                         or own.document)

    result = join_driver.run(job, JobConsoleEvents(console), own_part,
                             interrupt_guard=interrupts_announced)
    show_job_stacks(console, result)
    failure, payload = result.first_failure, result.payload()
    if args.json and render_result is not None and result.own_error is None:
        if failure is None:
            render.log(console, f"ddpkit: all {len(result.outcomes)} nodes finished their part")
        return render_result(console, result.outcomes, payload)
    if result.ok:
        if args.json:
            render.emit_json(console, document(f"{command}-job", 1, payload))
        if result.own_code == 0:
            render.log(console, f"ddpkit: all {len(result.outcomes)} nodes finished successfully")
        return result.own_code
    if failure is None and result.own_error is not None:
        raise result.own_error
    summary = job_summary(result.outcomes)
    if result.own_error is not None or command == "launch":
        raise JobFailed("job-failed", summary, "each node's output and run directory has the "
                        "details; `ddpkit doctor --log` explains common causes", details=payload)
    render.log(console, f"ddpkit: job failed: {summary}")
    return max(result.own_code, int(ExitCode.JOB_FAILED))


def _print_dry_run(console: Console, job: join_driver.JoinMasterJob, command: str,
                   tail: list[str], *, as_json: bool) -> None:
    if as_json:
        render.emit_json(console, document("join-plan", 2, {
            **job.where.to_dict(), **join_driver.shown_job(join_driver.join_job(job))}))
        return
    where = job.where
    render.line(console, f"would start a job store on {where.address}:{job.join_port} "
                         f"({where.ifname}: {where.reason}) for {job.job.nnodes} nodes and print a "
                         "`ddpkit join` token")
    render.line(console, f"job: {command} {' '.join(tail)}".rstrip())
