"""`ddpkit launch|test|bench|doctor --hosts/--hostfile`: the flags become a
:class:`~ddpkit.launch.ssh.driver.HostsJob`, :mod:`ddpkit.launch.ssh.driver` runs it, and this
module renders what it reports and how the job went."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.job_events import JobConsoleEvents, show_job_stacks
from ddpkit.cli.launch_options import (
    ResultRenderer,
    env_overrides,
    process_context,
    sigterm_as_interrupt,
)
from ddpkit.errors import JobFailed, UsageError
from ddpkit.launch.envpass import (
    ENV_FILE_NAME,
    PassedEnv,
    load_env_file,
    passed_env,
    shown,
    shown_env,
    untravelled,
    untravelled_warning,
)
from ddpkit.launch.job import Deadlines, JobSpec
from ddpkit.launch.outcomes import job_summary
from ddpkit.launch.ssh import driver as hosts_driver
from ddpkit.launch.ssh.fanout import NodeCommand
from ddpkit.launch.ssh.hostfile import Host, duplicate_warnings, load_hostfile, parse_hosts
from ddpkit.launch.ssh.remote import SshSettings
from ddpkit.report import document


def load_hosts(args: argparse.Namespace) -> tuple[Host, ...]:
    hosts = load_hostfile(Path(args.hostfile)) if args.hostfile else parse_hosts(args.hosts)
    if args.nnodes not in (1, len(hosts)):
        raise UsageError("nnodes-mismatch",
                         f"--nnodes {args.nnodes} but {len(hosts)} hosts are listed",
                         "drop --nnodes (the host list decides) or list that many hosts")
    return hosts


def whole_job(args: argparse.Namespace, subcommand: str, nnodes: int,
              tail: Sequence[str]) -> JobSpec:
    """The job every host runs, from the flags given here (``tail``: the command's own flags and
    its entry, e.g. ``[-m] script args...``)."""
    return JobSpec(
        command=subcommand, nnodes=nnodes, master_port=args.master_port,
        nproc_per_node=str(args.nproc_per_node),
        deadlines=Deadlines(args.connect_timeout, args.rdzv_timeout, args.max_restarts,
                            args.job_timeout, args.hang_timeout, args.hang_action),
        debug=bool(args.debug), ifname=args.ifname, entry=tuple(tail))


def job_env(args: argparse.Namespace, env: dict[str, str], cwd: Path,
            console: Console | None = None) -> PassedEnv:
    """What travels to the other nodes; with ``console``, one warning naming what frameworks
    read that will not (envpass.untravelled_warning)."""
    path = Path(args.env_file) if args.env_file else cwd / ENV_FILE_NAME
    loaded = load_env_file(path, required=bool(args.env_file))
    passed = passed_env(env, file_values=loaded.values if loaded else None,
                        file_path=str(path) if loaded is not None else None,
                        file_prefixes=loaded.prefixes if loaded else (),
                        overrides=env_overrides(args.env))
    warning = untravelled_warning(untravelled(env, passed), args.env_file or ENV_FILE_NAME)
    if console is not None and warning:
        render.log(console, f"ddpkit: warning: {warning}")
    return passed


def run(args: argparse.Namespace, console: Console, *, subcommand: str, tail: list[str],
        render_result: ResultRenderer | None = None) -> int:
    with sigterm_as_interrupt():  # SIGTERM stops the job exactly like Ctrl-C, preflight included
        return _run(args, console, subcommand=subcommand, tail=tail, render_result=render_result)


def _run(args: argparse.Namespace, console: Console, *, subcommand: str, tail: list[str],
         render_result: ResultRenderer | None) -> int:
    hosts = load_hosts(args)
    env, _home, cwd, python = process_context()
    settings = SshSettings(args.ssh_connect_timeout, tuple(args.ssh_option), args.ssh_config)
    passed = job_env(args, env, cwd, console)
    for warning in duplicate_warnings(hosts):
        render.log(console, f"warning: {warning}")
    job = hosts_driver.HostsJob(
        hosts=hosts, local=hosts_driver.this_machine_flags(hosts),
        job=whole_job(args, subcommand, len(hosts), tail), python=args.remote_python or python,
        cwd=str(cwd), passed=passed, base_env=env, ssh=settings, run_dir_base=args.run_dir,
        output_dir=Path(args.output_dir) if args.output_dir else None, master_addr=args.master_addr)
    if args.dry_run:
        nodes = hosts_driver.plan(job, args.master_addr or hosts_driver.MASTER_PLACEHOLDER)
        _print_dry_run(console, nodes, passed, as_json=args.json)
        return 0
    result = hosts_driver.run(job, JobConsoleEvents(console, node_lines_to_stderr=(
        args.json or subcommand == "test")))
    show_job_stacks(console, result)
    if render_result is not None:
        return render_result(console, result.outcomes, result.payload())
    if not result.ok:
        raise JobFailed("job-failed", job_summary(result.outcomes),
                        "each node's full output is above (or in --output-dir); its per-rank logs "
                        "are in its run directory on that machine", details=result.payload())
    if args.json:
        render.emit_json(console, document("launch-job", 1, result.payload()))
    render.log(console, f"ddpkit: all {len(result.outcomes)} nodes finished successfully")
    return 0


def _print_dry_run(console: Console, nodes: Sequence[NodeCommand], passed: PassedEnv, *,
                   as_json: bool) -> None:
    if as_json:
        render.emit_json(console, document("launch-job-plan", 1, {
            "nodes": [n.to_dict() for n in nodes], "env": passed.to_dict()}))
        return
    render.line(console, f"{len(nodes)} nodes; each checked first (ssh, python, ddpkit, torch), "
                         "then started in parallel:")
    for node in nodes:
        where = "here" if node.local else f"on {node.host.ssh_target}"
        render.line(console, f"node {node.node_rank} ({where}):")
        render.line(console, "  " + node.display())
    if passed.values or passed.overrides:
        render.line(console, "environment passed on over each node's stdin, never in a command line "
                             "(allow-list, env file, --env):")
        for key, value in shown_env(passed.values).items():
            render.line(console, f"  {key}={value}  ({passed.sources.get(key, '')})")
        for key, value in passed.overrides:
            render.line(console, f"  {key}={shown(key, value)}  (--env)")
