"""Helpers for the whole-job tests: scripts for the ranks, starting ddpkit in a node, waiting."""

from __future__ import annotations

import subprocess
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

from multinode import NodeRun, clean_env, ddpkit

from ddpkit.sim.topology import SimCluster, node_argv

# Every rank writes its pid, then waits in a collective: it can only end if the job is stopped.
SLEEPER = textwrap.dedent("""
    import datetime, os, pathlib, sys, time, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    pathlib.Path(sys.argv[1], f"rank{dist.get_rank()}.pid").write_text(str(os.getpid()))
    time.sleep(120)
""")
# Rank 1 (node 1) kills itself with SIGKILL once every rank is up; the others wait in a barrier.
KILLER = textwrap.dedent("""
    import datetime, os, pathlib, signal, sys, time, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    dist.barrier()
    if dist.get_rank() == 1:
        print("rank 1 about to SIGKILL itself", file=sys.stderr, flush=True)
        pathlib.Path(sys.argv[1], "killed-at").write_text(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    time.sleep(60)
""")
# Writes what it received: argv and the DDPK_* environment.
ECHO = textwrap.dedent("""
    import json, os, pathlib, sys
    pathlib.Path(os.environ["DDPK_OUT"]).write_text(json.dumps({
        "argv": sys.argv[1:],
        "env": {k: v for k, v in os.environ.items() if k.startswith(("DDPK_", "TORCH_DDPK"))},
        "cwd": os.getcwd()}))
""")


def script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def start_in(cluster: SimCluster, index: int, argv: Sequence[str], cwd: Path,
             env: dict[str, str] | None = None) -> NodeRun:
    """Run ``argv`` inside node ``index`` (or on the host side of the bridge when ``index`` < 0)."""
    command = list(argv) if index < 0 else node_argv(cluster, index, argv)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**clean_env(), **(env or {})}, cwd=cwd, start_new_session=True)
    return NodeRun(index, proc)


def ddpkit_in(cluster: SimCluster, index: int, cwd: Path, *args: str,
              env: dict[str, str] | None = None) -> NodeRun:
    return start_in(cluster, index, ddpkit(*args), cwd, env)


def wait_for_files(paths: Sequence[Path], runs: Sequence[NodeRun], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() and p.read_text().strip() for p in paths):
        for run in runs:
            if run.proc.poll() is not None:
                out, err = run.proc.communicate()
                raise AssertionError(f"a ddpkit exited early ({run.proc.returncode}):\n{err[-4000:]}")
        assert time.monotonic() < deadline, f"never appeared: {[p for p in paths if not p.exists()]}"
        time.sleep(0.2)
