"""Token mode on the master: `ddpkit launch|test --nnodes N ...` without --master-addr.

Starts the job store, prints `ddpkit join ddpk://...` for the other machines, shows who joins
from where, then runs node 0's share while watching every worker; one failure anywhere stops all.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from ddpkit import __version__
from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.launch_options import ResultRenderer, Share, ShareContext, process_context
from ddpkit.errors import ConfigError, DdpkitError, EnvironmentProblem, ExitCode, JobFailed
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.fanout import parse_document
from ddpkit.launch.outcomes import OK, first_failure, job_summary, outcome_from_error
from ddpkit.launch.token import JoinToken
from ddpkit.report import document

STOP_WAIT_S = 20.0  # for the workers to report after a stop order (their own cleanup takes <= 10 s)
SUCCESS_WAIT_S = 60.0  # for the workers to report after node 0 finished well


def advertised_address(ifname: str | None) -> tuple[str, str, str]:
    """(address, interface, why): where the other machines reach this one."""
    from ddpkit.net.interfaces import discover
    from ddpkit.net.select import best_address, find_interface, recommend

    nics = discover()
    if ifname:
        nic = find_interface(ifname, nics)
        address = best_address(nic)
        if address is None:
            raise ConfigError("interface-has-no-address", f"interface {ifname} has no IP address",
                              "give it one, or pick another with --ifname (see `ddpkit nics`)")
        return address.address, nic.name, f"--ifname {nic.name}"
    choice = recommend(nics)
    return choice.address, choice.nic.name, choice.reason


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


def shown_job(spec: Any) -> dict[str, Any]:
    """The join job as ddpkit may print it (values whose names look secret masked): the job
    itself, what travels with it, and the command node 1 will run."""
    from ddpkit.launch.envpass import shown, shown_env
    from ddpkit.launch.job import node_argv

    job = spec.job.to_dict()
    job["overrides"] = [[key, shown(key, value)] for key, value in spec.job.overrides]
    node1 = node_argv(spec.job, 1, spec.master_addr, env_in_argv=False)
    return {"job": job, "env": shown_env(spec.env), "join_timeout": spec.join_timeout,
            "ddpkit_version": spec.ddpkit_version, "node1_argv": ["ddpkit", *node1]}


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


def write_token_file(path: Path, token: JoinToken) -> None:
    """The token, readable by its owner only, written whole or not at all: through the atomic
    writer (an exclusively created 0600 temporary with an unpredictable name, then a rename)."""
    from ddpkit.ncclconf.atomic import write_atomic

    try:
        write_atomic(path, f"{token}\n".encode(), mode=0o600, backup=False, keep_owner=False)
    except DdpkitError as exc:
        raise EnvironmentProblem("token-file-failed", exc.message,
                                 "pass a --token-file in a directory you can write (or drop it and "
                                 "copy the printed line)", details=exc.details) from None


def _report_store(console: Console, master: Any) -> None:
    report = master.store_report()
    rejected = sum(report["rejected"].values())
    if rejected or report["removed_keys"]:
        render.log(console, f"ddpkit: warning: the job store saw {rejected} value(s) that did not "
                            f"open with this job's key ({', '.join(sorted(report['rejected'])) or '-'})"
                            f" and {report['removed_keys']} key(s) this job never wrote; all were "
                            "ignored and removed (someone else is writing to the job store)")


def run_master(args: argparse.Namespace, console: Console, *, command: str, tail: list[str],
               share: Share, render_result: ResultRenderer | None = None) -> int:
    """``tail``: what every node's command ends with (the command's own flags, the entry).

    With --json the whole job is one document on stdout: node 0's own document is captured and
    attached to its outcome, and ``render_result`` (the same one the ssh fan-out uses) or, for
    launch, a ``launch-job`` document lists every node."""
    from ddpkit.cli.hosts_mode import job_env, whole_job
    from ddpkit.launch import join
    from ddpkit.launch.join_store import host_store
    from ddpkit.launch.preflight import check_port_free
    from ddpkit.launch.token import new_token

    address, ifname, why = advertised_address(args.ifname)
    env, home, cwd, python = process_context()
    passed = job_env(args, env, cwd)
    token = new_token(address, args.join_port)
    job = dataclasses.replace(whole_job(args, command, args.nnodes, tail), ifname=None,
                              overrides=tuple(passed.overrides))  # each node picks its interface
    spec = join.JoinJob(job=job, master_addr=address, env=passed.values,
                        join_timeout=args.join_timeout, ddpkit_version=__version__, cwd=str(cwd))
    if args.dry_run:
        if args.json:
            render.emit_json(console, document("join-plan", 2, {
                "address": address, "interface": ifname, "reason": why, **shown_job(spec)}))
        else:
            render.line(console, f"would start a job store on {address}:{args.join_port} ({ifname}: "
                                 f"{why}) for {args.nnodes} nodes and print a `ddpkit join` token")
            render.line(console, f"job: {command} {' '.join(tail)}".rstrip())
        return 0
    check_port_free(args.join_port, flag="--join-port", what="job-store port (token mode)",
                    fix="(the token tells the other nodes)")
    check_port_free(args.master_port)
    def on_reject(name: str, why: str) -> None:
        render.log(console, f"ddpkit: warning: ignored a value under {name!r} in the job store that "
                            f"this job did not write ({why}); someone else is writing to "
                            f"{token.endpoint} (counted; see docs/multi-node.md, threat model)")

    master = join.MasterSide(host_store(token, on_reject=on_reject), spec)
    master.publish()
    render.log(console, f"ddpkit: job store on {address}:{args.join_port} ({ifname}: {why})")
    others = args.nnodes - 1
    where = "the other machine" if others == 1 else f"each of the other {others} machines"
    render.log(console, f"ddpkit: on {where}, run:")
    render.log(console, f"  ddpkit join {token}")
    if args.token_file:
        write_token_file(Path(args.token_file), token)
    render.log(console, f"ddpkit: waiting for {others} node{'s' if others > 1 else ''} to join "
                        f"(up to {args.join_timeout:g} s)")
    joined = 0

    def on_join(node: join.JoinedNode) -> None:
        nonlocal joined
        joined += 1
        render.log(console, f"ddpkit: {node.describe()} [{joined}/{args.nnodes - 1}]")

    with interrupts_announced(lambda: master.stop("interrupted on the master")):
        try:
            master.wait_for_nodes(on_join, timeout=args.join_timeout)
        except (DdpkitError, KeyboardInterrupt) as exc:
            reason = exc.message if isinstance(exc, DdpkitError) else "interrupted on the master"
            master.stop(reason)
            master.collect(wait=STOP_WAIT_S if master.joined else 0.0)
            raise
        master.release()
        namespace = argparse.Namespace(**{**vars(args), "master_addr": address})
        config, options = node_config(command, namespace)
        context = ShareContext(env=env, home=home, cwd=cwd, python=python, as_json=args.json,
                               should_stop=master.should_stop, hide_peer_commands=True)
        own_error: DdpkitError | None = None
        captured = io.StringIO()
        node0_console = Console(out=captured, err=console.err, color=False) if args.json \
            else console
        try:
            code, own = share(node0_console, config, context, options)
        except DdpkitError as exc:
            own_error, code = exc, int(exc.exit_code)
            own = outcome_from_error(exc.to_dict(), node_rank=0, host=socket.gethostname())
        except KeyboardInterrupt:
            master.stop("interrupted on the master")
            master.collect(wait=STOP_WAIT_S)
            raise
        own = dataclasses.replace(own, observed_at=time.monotonic(),
                                  document=parse_document(captured.getvalue()) or own.document)
        if own.state != OK:
            master.stop(f"node 0 ({own.host}) {own.state}: {own.how()}")
        stopped = own.state != OK or master.should_stop() is not None
        outcomes = (own, *master.collect(wait=STOP_WAIT_S if stopped else SUCCESS_WAIT_S))
    _report_store(console, master)
    from ddpkit.launch.jobstacks import job_stacks_of

    stack_lines, stack_reports = job_stacks_of(o.stack_reports for o in outcomes)
    if stack_lines:
        render.log(console, f"ddpkit: every rank of the job, by where it is ({len(outcomes)} nodes):")
        for text in stack_lines:
            render.log(console, f"ddpkit:   {text}")
    failure = first_failure(outcomes)
    payload = {"ok": failure is None and own_error is None, "mode": "join",
               "master": {"address": address, "interface": ifname, "reason": why},
               "first_failure": failure.to_dict() if failure else None,
               "nodes": [o.to_dict() for o in outcomes],
               "stacks": {"summary": stack_lines, "reports": stack_reports} if stack_reports else None}
    if args.json and render_result is not None and own_error is None:
        if failure is None:
            render.log(console, f"ddpkit: all {len(outcomes)} nodes finished their part")
        return render_result(console, outcomes, payload)
    if failure is None and own_error is None:
        if args.json:
            render.emit_json(console, document(f"{command}-job", 1, payload))
        if code == 0:
            render.log(console, f"ddpkit: all {len(outcomes)} nodes finished successfully")
        return code
    if failure is None and own_error is not None:
        raise own_error
    summary = job_summary(outcomes)
    details = payload
    if own_error is not None or command == "launch":
        raise JobFailed("job-failed", summary, "each node's output and run directory has the "
                        "details; `ddpkit doctor --log` explains common causes", details=details)
    render.log(console, f"ddpkit: job failed: {summary}")
    return max(code, int(ExitCode.JOB_FAILED))
