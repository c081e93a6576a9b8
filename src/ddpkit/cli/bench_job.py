"""`ddpkit bench` as a whole job from the master: the flags every node repeats, and the result.

Over ssh (``--hosts``) every node runs ``ddpkit bench ... --supervised --json``; node 0 prints the
bench document, and this machine (the supervisor) writes ``--out``/``--csv``/``--plot`` from it and
shows the same tables a per-node bench shows. With a join token the master runs node 0 itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.errors import ExitCode
from ddpkit.launch.outcomes import NodeOutcome, first_failure, job_summary

# dest -> flag of every bench option a node needs (not --out/--csv/--plot: node 0's outputs are
# written where the job was started; not --show-output: each node's own choice).
VALUE_FLAGS = {
    "min_bytes": "--min-bytes", "max_bytes": "--max-bytes", "step_factor": "--step-factor",
    "warmup_iters": "--warmup-iters", "iters": "--iters", "ops": "--ops",
    "tcp_seconds": "--tcp-seconds", "tcp_streams": "--tcp-streams",
    "tcp_max_bytes": "--tcp-max-bytes", "params": "--params", "batch": "--batch",
    "steps": "--steps", "warmup": "--warmup", "powersgd_warmup": "--powersgd-warmup",
    "settings": "--settings", "setting_timeout": "--setting-timeout",
    "efficiency_threshold": "--efficiency-threshold", "backend": "--backend",
    "net_timeout": "--net-timeout",
}
SWITCHES = {"tcp": "--tcp", "collectives": "--collectives", "scaling": "--scaling",
            "socket_sweep": "--socket-sweep", "quick": "--quick"}
NODE_OWN = ("out", "csv", "plot", "show_output")


def bench_flags(args: argparse.Namespace) -> list[str]:
    """The bench's own flags as given here, for every node's command."""
    flags: list[str] = []
    for dest, flag in VALUE_FLAGS.items():
        value = getattr(args, dest)
        if value is not None:
            flags += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    flags += [flag for dest, flag in SWITCHES.items() if getattr(args, dest)]
    return flags


def render_job(console: Console, outcomes: Sequence[NodeOutcome], payload: dict[str, Any],
               args: argparse.Namespace) -> int:
    """The fan-out's result: node 0's bench document, written and shown here, then the job."""
    from ddpkit.cli.commands import bench

    doc = next((o.document for o in outcomes
                if o.document and str(o.document.get("schema", "")).startswith("ddpkit.bench/")),
               None)
    failure = first_failure(outcomes)
    code = int(ExitCode.OK)
    if doc is not None:
        given = {"bench": bench.options_from_args(args), "out": args.out, "csv": args.csv,
                 "plot": args.plot}
        where = args.out or f"{doc.get('run_dir', 'node 0')}/bench.json (on node 0)"
        code = bench.report(console, dict(doc), given, as_json=args.json, where=where)
    if failure is not None:
        render.log(console, f"ddpkit: job failed: {job_summary(outcomes)}")
        return max(code, int(ExitCode.JOB_FAILED))
    if doc is None:
        render.log(console, "ddpkit bench: node 0 printed no bench document")
        return int(ExitCode.FAILURE)
    return code
