"""`ddpkit launch|test --hosts/--hostfile`: preflight every host, then supervise one node per host."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddpkit import __version__
from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.launch_options import (
    ResultRenderer,
    env_overrides,
    process_context,
    sigterm_as_interrupt,
)
from ddpkit.errors import DdpkitError, JobFailed, NetworkProblem, UsageError
from ddpkit.launch.envpass import (
    ENV_FILE_NAME,
    PassedEnv,
    load_env_file,
    passed_env,
    shown,
    shown_env,
)
from ddpkit.launch.fanout import NodeCommand, plan_nodes, supervise
from ddpkit.launch.hostfile import Host, duplicate_warnings, load_hostfile, parse_hosts
from ddpkit.launch.job import Deadlines, JobSpec
from ddpkit.launch.outcomes import OK, NodeOutcome, first_failure, job_summary
from ddpkit.launch.plan import LOOPBACK_NAMES
from ddpkit.launch.probe import MasterChoice, choose_master, probe_hosts, require_fit
from ddpkit.launch.remote import SshSettings, remote_command, ssh_argv
from ddpkit.report import document

MASTER_PLACEHOLDER = "<node 0's address, found at run time>"


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


def job_env(args: argparse.Namespace, env: dict[str, str], cwd: Path) -> PassedEnv:
    path = Path(args.env_file) if args.env_file else cwd / ENV_FILE_NAME
    values = load_env_file(path, required=bool(args.env_file))
    return passed_env(env, file_values=values, file_path=str(path) if values is not None else None,
                      overrides=env_overrides(args.env))


def this_machine_flags(hosts: Sequence[Host]) -> list[bool]:
    """Per host: reached without ssh (no user or port given, and its name is one of our
    addresses). The interfaces are read once for the whole list, not once per host."""
    from ddpkit.net.interfaces import discover, interface_holding
    from ddpkit.net.route import resolve

    nics = None
    flags = []
    for host in hosts:
        if host.user or host.port:
            flags.append(False)
            continue
        if host.name in LOOPBACK_NAMES:
            flags.append(True)
            continue
        try:
            addresses = resolve(host.name)
        except DdpkitError:
            flags.append(False)
            continue
        nics = nics if nics is not None else discover()
        flags.append(any(interface_holding(address, nics) is not None for address in addresses))
    return flags


def run(args: argparse.Namespace, console: Console, *, subcommand: str, tail: list[str],
        render_result: ResultRenderer | None = None) -> int:
    with sigterm_as_interrupt():  # SIGTERM stops the job exactly like Ctrl-C, preflight included
        return _run(args, console, subcommand=subcommand, tail=tail, render_result=render_result)


def _run(args: argparse.Namespace, console: Console, *, subcommand: str, tail: list[str],
         render_result: ResultRenderer | None) -> int:
    hosts = load_hosts(args)
    env, _home, cwd, python = process_context()
    settings = SshSettings(args.ssh_connect_timeout, tuple(args.ssh_option), args.ssh_config)
    remote_python = args.remote_python or python
    passed = job_env(args, env, cwd)
    for warning in duplicate_warnings(hosts):
        render.log(console, f"warning: {warning}")
    local = this_machine_flags(hosts)

    def plan(master: str) -> tuple[NodeCommand, ...]:
        return plan_nodes(hosts, local, job=whole_job(args, subcommand, len(hosts), tail),
                          master_addr=master, python=remote_python,
                          cwd=str(cwd), passed=passed, base_env=env, settings=settings,
                          run_dir_base=args.run_dir)

    if args.dry_run:
        nodes = plan(args.master_addr or MASTER_PLACEHOLDER)
        _print_dry_run(console, nodes, passed, as_json=args.json)
        return 0
    render.log(console, f"ddpkit: checking {len(hosts)} hosts in parallel (ssh, python, ddpkit, "
                        "torch, working directory)")
    probes = probe_hosts(hosts, local=local, python=remote_python, cwd=str(cwd), settings=settings,
                         version=__version__)
    for probe in probes:
        where = "this machine" if probe.local else f"ssh {probe.host.ssh_target}"
        state = "ok" if probe.ok else "; ".join(probe.problems)
        render.log(console, f"ddpkit:   node {probe.node_rank} {probe.host.label} "
                            f"({probe.hostname}, {where}): {state}")
    require_fit(probes)
    master = choose_master(probes, explicit=args.master_addr, route_here=_route_here,
                           route_on_master=lambda target: _route_on(hosts[0], target, remote_python,
                                                                    settings))
    render.log(console, f"ddpkit: master address {master.address} ({master.reason})")
    nodes = plan(master.address)
    events = _Events(console, to_stderr=args.json or subcommand == "test")
    output_dir = Path(args.output_dir) if args.output_dir else None
    outcomes = supervise(nodes, events, output_dir=output_dir)
    _show_job_stacks(console, outcomes)
    if render_result is not None:
        return render_result(console, outcomes, _payload(master, outcomes))
    failure = first_failure(outcomes)
    if args.json and failure is None:
        render.emit_json(console, document("launch-job", 1, _payload(master, outcomes)))
    if failure is not None:
        raise JobFailed("job-failed", job_summary(outcomes),
                        "each node's full output is above (or in --output-dir); its per-rank logs "
                        "are in its run directory on that machine",
                        details=_payload(master, outcomes))
    render.log(console, f"ddpkit: all {len(outcomes)} nodes finished successfully")
    return 0


def _show_job_stacks(console: Console, outcomes: Sequence[NodeOutcome]) -> None:
    """A node dumped its ranks' stacks (a hang): group every node's ranks together."""
    from ddpkit.launch.jobstacks import job_stacks

    lines, _ = job_stacks(o.document for o in outcomes)
    if lines:
        render.log(console, f"ddpkit: every rank of the job, by where it is ({len(outcomes)} nodes):")
        for text in lines:
            render.log(console, f"ddpkit:   {text}")


def _payload(master: MasterChoice, outcomes: Sequence[NodeOutcome]) -> dict[str, Any]:
    from ddpkit.launch.jobstacks import job_stacks

    first = first_failure(outcomes)
    lines, reports = job_stacks(o.document for o in outcomes)
    return {"ok": first is None, "mode": "hosts",
            "master": {"address": master.address, "reason": master.reason},
            "first_failure": first.to_dict() if first else None,
            "nodes": [o.to_dict() for o in outcomes],
            "stacks": {"summary": lines, "reports": reports} if reports else None}


class _Events:
    def __init__(self, console: Console, *, to_stderr: bool) -> None:
        self.console = console
        self.to_stderr = to_stderr

    def node_line(self, node: NodeCommand, text: str) -> None:
        prefixed = f"[{node.label}] {text}"
        if self.to_stderr:
            render.log(self.console, prefixed)
        else:
            render.line(self.console, prefixed)

    def node_finished(self, outcome: NodeOutcome) -> None:
        how = "finished" if outcome.state == OK else f"{outcome.state}: {outcome.how()}"
        render.log(self.console, f"ddpkit: node {outcome.node_rank} ({outcome.host}) {how}")

    def stopping(self, reason: str) -> None:
        render.log(self.console, f"ddpkit: stopping every node: {reason}")


def _route_here(target: str) -> tuple[str, str]:
    from ddpkit.net.route import route_to

    route = route_to(target)
    return route.source, route.ifname


def _route_on(host: Host, target: str, python: str, settings: SshSettings) -> tuple[str, str]:
    """Node 0's own route lookup (``ddpkit nics --to``), run there over ssh."""
    argv = ssh_argv(host, remote_command([python, "-m", "ddpkit", "nics", "--to", target, "--json"]),
                    settings)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=settings.connect_timeout + 30)
        route = json.loads(proc.stdout[proc.stdout.find("{"):])["route"]
        return str(route["source"]), str(route["ifname"])
    except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as exc:
        raise NetworkProblem("remote-route-failed",
                             f"`ddpkit nics --to {target}` on {host.ssh_target} gave no route ({exc})",
                             "pass --master-addr") from None


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
