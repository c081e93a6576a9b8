"""Token mode on the master: `ddpkit launch|test|bench|doctor --nnodes N ...` without
--master-addr. The command's :class:`~ddpkit.cli.job.job_command.JobRequest` becomes a
:class:`~ddpkit.launch.join.driver.JoinMasterJob`,
:mod:`ddpkit.launch.join.driver` runs it (the store, the token, the joins, every node's outcome),
and this module supplies node 0's own share, renders what the driver reports and how the job went.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from ddpkit.cli.job.job_command import (
    JobCommand,
    JobRequest,
    Options,
    ResultRenderer,
    job_env,
    whole_job,
)
from ddpkit.cli.job.job_events import JobConsoleEvents, show_job_stacks
from ddpkit.cli.job.job_verdict import failure_summary
from ddpkit.cli.node.launch_options import ShareContext, process_context
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.cli.torch_import import import_torch
from ddpkit.errors import ExitCode, JobFailed
from ddpkit.i18n import _, _n
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.join import driver as join_driver
from ddpkit.launch.outcomes import NodeOutcome
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


def run_master(request: JobRequest, console: Console, job: JobCommand[Options], *,
               own_config: Callable[[str], tuple[LaunchConfig, Options]], tail: list[str],
               render_result: ResultRenderer | None = None) -> int:
    """``tail``: what every node's command ends with (the command's own flags, the entry);
    ``own_config``: node 0's configuration and options, given the master address chosen here.

    With --json the whole job is one document on stdout: node 0's own document is captured and
    attached to its outcome, and ``render_result`` (the same one the ssh fan-out uses) or, for
    launch, a ``<command>-job`` document lists every node."""
    where = join_driver.advertised_address(request.ifname)
    env, home, cwd, python = process_context()
    master_job = join_driver.JoinMasterJob(
        job=whole_job(request, job.name, request.nnodes, tail), passed=job_env(request, env, cwd, console),
        cwd=str(cwd), where=where, join_port=request.join_port, join_timeout=request.join_timeout,
        token_file=Path(request.token_file) if request.token_file else None)
    if request.dry_run:
        _print_dry_run(console, master_job, job.name, tail, as_json=request.as_json)
        return 0
    config, options = own_config(where.address)  # a bad value fails here, before the store starts
    import_torch(console.verbosity)  # the job store's; after the environment was read
    config = dataclasses.replace(config, progress_key=master_job.progress_key)

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        context = ShareContext(env=join_driver.own_env(master_job, env), home=home, cwd=cwd,
                               python=python, as_json=request.as_json, should_stop=should_stop,
                               hide_peer_commands=True)
        captured = io.StringIO()  # with --json, node 0's document joins the job's one document
        node0_console = Console(out=captured, err=console.err, color=False,
                                verbosity=console.verbosity) if request.as_json \
            else console
        code, own = job.share(node0_console, config, context, options)
        return code, dataclasses.replace(own, document=parse_document(captured.getvalue())
                                         or own.document)

    result = join_driver.run(master_job, JobConsoleEvents(console), own_part,
                             interrupt_guard=interrupts_announced)
    show_job_stacks(console, result)
    failure, payload = result.first_failure, result.payload()
    if request.as_json and render_result is not None and result.own_error is None:
        if failure is None:
            render.status(console, _n("{count} node finished its part",
                                      "all {count} nodes finished their part",
                                      len(result.outcomes)), keep=True)
        return render_result(console, result.outcomes, payload)
    if result.ok:
        if request.as_json:
            render.emit_json(console, document(f"{job.name}-job", 1, payload))
        if result.own_code == 0:
            render.status(console, _n("{count} node finished successfully",
                                      "all {count} nodes finished successfully",
                                      len(result.outcomes)), keep=True)
        return result.own_code
    if failure is None and result.own_error is not None:
        raise result.own_error
    summary, fix = failure_summary(result.outcomes, payload, _(
        "each node's output and run directory has the details; `ddpkit doctor --log` explains "
        "common causes"))
    if result.own_error is not None or job.name == "launch":
        raise JobFailed("job-failed", summary, fix, details=payload)
    render.status(console, _("job failed: {summary}", summary=summary), keep=True)
    return max(result.own_code, int(ExitCode.JOB_FAILED))


def _print_dry_run(console: Console, job: join_driver.JoinMasterJob, command: str,
                   tail: list[str], *, as_json: bool) -> None:
    if as_json:
        render.emit_json(console, document("join-plan", 2, {
            **job.where.to_dict(), **join_driver.shown_job(join_driver.join_job(job))}))
        return
    where = job.where
    render.wrapped(console, _("would start a job store on {address}:{port} ({ifname}: {reason}) "
                              "for {nnodes} nodes and print a `ddpkit join` token",
                              address=where.address, port=job.join_port, ifname=where.ifname,
                              reason=where.reason, nnodes=job.job.nnodes))
    shown = " ".join([command, *tail]).rstrip()
    render.line(console, _("job: {command}", command=shown))
