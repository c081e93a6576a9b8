"""Running ddpkit on the nodes of a simulated cluster from a test: start, wait, census, cleanup."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import psutil

from ddpkit.sim import cluster as sim
from ddpkit.sim.spec import SimSpec
from ddpkit.sim.topology import SimCluster, node_argv

_counter = itertools.count()


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_"))}


@contextlib.contextmanager
def simulated(nodes: int, *, ifnames: dict[int, str] | None = None,
              rate: str | None = None) -> Iterator[SimCluster]:
    """A fresh cluster with a name and subnet of its own, always torn down; nothing may remain."""
    k = (os.getpid() + next(_counter)) % 200
    name = f"dkl{k:03d}"[:6]
    spec = SimSpec(nodes=nodes, name=name, subnet=f"10.88.{k}.0/24", rate=rate,
                   ifnames=ifnames or {})
    cluster = sim.up(spec)
    try:
        yield cluster
    finally:
        report = sim.down(name)
        leftover_ns = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                 text=True).stdout.split() if n.startswith(name)]
        assert not leftover_ns, f"namespaces left behind: {leftover_ns}"
        # Anything still running inside the nodes at teardown was left behind by the code under test.
        assert report.processes_killed == (), f"processes left in the nodes: {report.processes_killed}"


@dataclass
class NodeRun:
    index: int
    proc: subprocess.Popen[str]
    out: str = ""
    err: str = ""

    @property
    def code(self) -> int | None:
        return self.proc.returncode


def start(cluster: SimCluster, index: int, argv: Sequence[str]) -> NodeRun:
    proc = subprocess.Popen(node_argv(cluster, index, argv), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=clean_env(),
                            start_new_session=True)
    return NodeRun(index, proc)


def ddpkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "ddpkit", *args]


def wait_all(runs: Sequence[NodeRun], timeout: float) -> bool:
    """Wait for every run; on timeout kill the rest (whole trees). True when all finished in time."""
    deadline = time.monotonic() + timeout
    finished = True
    for run in runs:
        try:
            run.out, run.err = run.proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            finished = False
            kill_tree(run.proc.pid)
            run.out, run.err = run.proc.communicate(timeout=30)
    return finished


def kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=10)


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def alive(procs: Sequence[psutil.Process]) -> list[int]:
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
    return out


def error_message(err: str) -> str:
    """The ``error [...]`` message as one line: the renderer wraps it to the terminal's width,
    its continuation lines indented, up to its ``fix:`` line."""
    lines = err.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("error [")), None)
    if start is None:
        return err[-2000:]
    parts = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  ") or line.lstrip().startswith("fix:"):
            break
        parts.append(line.strip())
    return " ".join(parts)
