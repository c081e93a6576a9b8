"""`ddpkit test`: the seed's ddp.py done properly, run through `ddpkit launch` itself."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.launch_options import (
    ConsoleEvents,
    add_launch_options,
    config_from_args,
    print_plan,
    process_context,
    sigterm_as_interrupt,
)
from ddpkit.cli.options import add_flag, add_json_flag
from ddpkit.errors import DdpkitError, ExitCode
from ddpkit.report import document

HELP = "check the cluster end to end: collectives, DDP and bandwidth in every rank"


def configure(parser: argparse.ArgumentParser) -> None:
    add_launch_options(parser)
    add_json_flag(parser)
    parser.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto",
                        help="auto: NCCL when CUDA is present, Gloo otherwise")
    parser.add_argument("--quick", action="store_true", help="small bandwidth sweep")
    add_flag(parser, "--pg-timeout", type=float, default=120.0,
             help="process-group timeout inside the ranks (seconds, default 120)")
    parser.add_argument("--show-output", action="store_true",
                        help="stream the ranks' own output (hidden by default)")


def run(args: argparse.Namespace, console: Console) -> int:
    from ddpkit import clustertest
    from ddpkit.launch import session
    from ddpkit.launch.config import LaunchConfig

    env, home, cwd, python = process_context()
    # The run dir is decided first so the report directory can be passed to the worker.
    probe = config_from_args(args, entry=clustertest.WORKER_MODULE, entry_args=[], is_module=True)
    run_dir = Path(probe.run_dir) if probe.run_dir else session.default_run_dir(probe, cwd)
    report_dir = run_dir / "test-report"
    config = LaunchConfig(**{
        **probe.__dict__,
        "run_dir": str(run_dir),
        "entry_args": tuple(clustertest.worker_args(report_dir, backend=args.backend,
                                                    quick=args.quick, pg_timeout=args.pg_timeout)),
    })
    peer = ["test", "--backend", args.backend, "--pg-timeout", f"{args.pg_timeout:g}"]
    if args.quick:
        peer.append("--quick")
    plan = session.prepare(config, env, home=home, cwd=cwd, python=python, peer_command=tuple(peer))
    if args.dry_run:
        if args.json:
            render.emit_json(console, document("launch-plan", 1, plan.to_dict()))
        else:
            print_plan(console, plan)
        return 0
    events = ConsoleEvents(console, output_to_stderr=True, quiet_output=not args.show_output)
    events.planned(plan)
    launch_error: DdpkitError | None = None
    with sigterm_as_interrupt():
        try:
            session.execute(plan, events)
        except DdpkitError as exc:
            if exc.error_id not in ("job-failed", "job-timeout"):
                raise
            launch_error = exc
    verdict = clustertest.read_verdict(report_dir)
    if args.json:
        payload = verdict.to_dict()
        payload["interface"] = plan.interface.ifname
        payload["run_dir"] = str(run_dir)
        if launch_error is not None:
            payload["launch_error"] = launch_error.to_dict()
        render.emit_json(console, document("test", 1, payload))
    else:
        headers, rows = verdict.rows()
        if verdict.ranks:
            render.table(console, headers, rows)
            render.line(console)
        render.line(console, verdict.headline())
    if launch_error is not None:
        render.log(console, f"ddpkit: {launch_error.message}")
        render.log(console, f"  fix: {launch_error.hint}")
        return int(launch_error.exit_code)
    return ExitCode.OK if verdict.ok else ExitCode.FAILURE
