"""Per-node bench: a master that quits at once (``--plot`` without matplotlib) tells the other
node, which stops within 5 s of the master's exit instead of waiting out its rendezvous timeout
(issue 31: the worker waited 11 min 02 s). Two real ``ddpkit bench`` processes on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ports import free_port

pytestmark = [pytest.mark.slow]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_"))}
    return {**env, **(extra or {})}


def _bench(tmp_path: Path, rank: int, port: int, *flags: str,
           env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ddpkit", "bench", "--nnodes", "2", "--node-rank", str(rank),
         "--master-addr", "127.0.0.1", "--master-port", str(port), "--quick", "--run-dir",
         str(tmp_path / f"node{rank}"), *flags],
        env=_env(env), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.timeout(150)
def test_the_worker_learns_within_5_s_that_the_master_quit(tmp_path: Path) -> None:
    hidden = tmp_path / "no-matplotlib" / "matplotlib"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('not installed here')\n")
    port = free_port()
    worker = _bench(tmp_path, 1, port)
    master = None
    try:
        time.sleep(3)  # the worker is up and waits for the master, as in the report
        assert worker.poll() is None, worker.communicate()
        master = _bench(tmp_path, 0, port, "--plot", str(tmp_path / "bench.png"),
                        env={"PYTHONPATH": str(hidden.parent)})
        _out, master_err = master.communicate(timeout=60)
        master_quit = time.monotonic()
        _out, worker_err = worker.communicate(timeout=60)
        waited = time.monotonic() - master_quit
    finally:
        for proc in (worker, master):
            if proc is not None and proc.poll() is None:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
                proc.kill()
                proc.communicate()
    assert master.returncode != 0 and "error [matplotlib-missing]" in master_err, master_err
    assert waited < 5, (waited, worker_err[-3000:])
    said = " ".join(worker_err.split())
    assert "error [job-stopped]: node 0 quit: matplotlib-missing" in said, worker_err[-3000:]
    assert "node 0 prints and writes the results" not in said
    assert worker.returncode != 0
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == [], leftovers
