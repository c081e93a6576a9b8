"""`ddpkit bench` as a whole job from the master: the flags every node repeats, and the result.

Over ssh (``--hosts``) every node runs ``ddpkit bench ... --supervised --json``; node 0 prints the
bench document, and this machine (the supervisor) writes ``--out``/``--csv``/``--plot`` from it and
shows the same tables a per-node bench shows. With a join token the master runs node 0 itself.
"""

from __future__ import annotations

import argparse

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
    "net_timeout": "--net-timeout", "strategies": "--strategies",
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
