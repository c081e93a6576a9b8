"""`ddpkit launch|test|bench|doctor --hosts/--hostfile`: the command's
:class:`~ddpkit.cli.job.job_command.JobRequest` becomes a :class:`~ddpkit.launch.ssh.driver.HostsJob`,
:mod:`ddpkit.launch.ssh.driver` runs it, and this module renders what it reports and how the job
went."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddpkit.cli.job.job_command import (
    JobCommandName,
    JobRequest,
    ResultRenderer,
    job_env,
    load_hosts,
    whole_job,
)
from ddpkit.cli.job.job_events import JobConsoleEvents, show_job_stacks
from ddpkit.cli.job.job_verdict import failure_summary
from ddpkit.cli.node.launch_options import process_context, sigterm_as_interrupt
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import JobFailed
from ddpkit.i18n import _, _n
from ddpkit.launch.envpass import PassedEnv, shown, shown_env
from ddpkit.launch.ssh import driver as hosts_driver
from ddpkit.launch.ssh.fanout import NodeCommand
from ddpkit.launch.ssh.hostfile import duplicate_warnings
from ddpkit.report import document


def run(request: JobRequest, console: Console, *, command: JobCommandName, tail: list[str],
        render_result: ResultRenderer | None = None) -> int:
    """``tail``: what every node's command ends with (the command's own flags, the entry)."""
    with sigterm_as_interrupt():  # SIGTERM stops the job exactly like Ctrl-C, preflight included
        return _run(request, console, command=command, tail=tail, render_result=render_result)


def _run(request: JobRequest, console: Console, *, command: JobCommandName, tail: list[str],
         render_result: ResultRenderer | None) -> int:
    hosts = load_hosts(request)
    # every node shows as much as this console does: -q and -v travel (node lines are shown as
    # each node rendered them)
    tail = [*{"quiet": ["-q"], "verbose": ["-v"]}.get(console.verbosity, []), *tail]
    env, _home, cwd, python = process_context()
    passed = job_env(request, env, cwd, console)
    for warning in duplicate_warnings(hosts):
        render.log(console, _("warning: {message}", message=warning))
    job = hosts_driver.HostsJob(
        hosts=hosts, local=hosts_driver.this_machine_flags(hosts),
        job=whole_job(request, command, len(hosts), tail), python=request.remote_python or python,
        cwd=str(cwd), passed=passed, base_env=env, ssh=request.ssh, run_dir_base=request.run_dir,
        output_dir=Path(request.output_dir) if request.output_dir else None,
        master_addr=request.master_addr)
    if request.dry_run:
        nodes = hosts_driver.plan(job, request.master_addr or hosts_driver.MASTER_PLACEHOLDER)
        _print_dry_run(console, nodes, passed, as_json=request.as_json)
        return 0
    result = hosts_driver.run(job, JobConsoleEvents(console, node_lines_to_stderr=(
        request.as_json or command == "test")))
    show_job_stacks(console, result)
    if render_result is not None:
        return render_result(console, result.outcomes, result.payload())
    if not result.ok:
        payload = result.payload()
        summary, fix = failure_summary(result.outcomes, payload, _(
            "each node's full output is above (or in --output-dir); its per-rank logs are in its "
            "run directory on that machine"))
        raise JobFailed("job-failed", summary, fix, details=payload)
    if request.as_json:
        render.emit_json(console, document("launch-job", 1, result.payload()))
    render.status(console, _n("{count} node finished successfully",
                              "all {count} nodes finished successfully", len(result.outcomes)),
                  keep=True)
    return 0


def _print_dry_run(console: Console, nodes: Sequence[NodeCommand], passed: PassedEnv, *,
                   as_json: bool) -> None:
    if as_json:
        render.emit_json(console, document("launch-job-plan", 1, {
            "nodes": [n.to_dict() for n in nodes], "env": passed.to_dict()}))
        return
    render.line(console, _n("{count} node; checked first (ssh, python, ddpkit, torch), then "
                            "started:",
                            "{count} nodes; each checked first (ssh, python, ddpkit, torch), then "
                            "started in parallel:", len(nodes)))
    for node in nodes:
        if node.local:
            render.line(console, _("node {rank} (here):", rank=node.node_rank))
        else:
            render.line(console, _("node {rank} (on {target}):", rank=node.node_rank,
                                   target=node.host.ssh_target))
        render.line(console, "  " + node.display())
    if passed.values or passed.overrides:
        render.line(console, _("environment passed on over each node's stdin, never in a command "
                               "line (allow-list, env file, --env):"))
        for key, value in shown_env(passed.values).items():
            render.line(console, f"  {key}={value}  ({passed.sources.get(key, '')})")
        for key, value in passed.overrides:
            render.line(console, _("  {key}={value}  (--env)", key=key, value=shown(key, value)))
