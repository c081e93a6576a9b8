"""The collective sweep worker under real torchrun: 2 ranks on loopback, Gloo."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]




def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_"))}
    env.update({"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"})
    return env


def _session_members(sid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return members


def _torchrun(*worker_args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the worker under torchrun in a session of its own; prove nothing of it survives."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node",
            "2", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
            "-m", "ddpkit.workers.collectives", *worker_args]
    proc = subprocess.Popen(argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        left = _session_members(proc.pid)
        for survivor in left:
            survivor.kill()
    assert left == [], f"processes left behind: {left}"
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_sweep_two_ranks(tmp_path: Path) -> None:
    out = tmp_path / "collectives.json"
    result = _torchrun("-b", "1K", "-e", "64K", "-f", "4", "-w", "2", "-n", "5", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ddpkit.collectives/1"
    assert doc["world_size"] == 2 and doc["backend"] == "gloo"
    assert doc["wrong_total"] == 0
    factors = {"all_reduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5, "broadcast": 1.0,
               "all_to_all": 0.5}  # nccl-tests' factors at n = 2
    assert [op["op"] for op in doc["ops"]] == list(factors)
    measured = [op for op in doc["ops"] if op["supported"]]
    assert {op["op"] for op in measured} >= {"all_reduce", "all_gather", "broadcast"}
    for op in doc["ops"]:
        if not op["supported"]:
            assert op["note"] and op["results"] == []  # skipped with a reason
            continue
        assert op["busbw_factor"] == factors[op["op"]]
        assert [r["bytes"] for r in op["results"]] == [1024, 4096, 16384, 65536]
        for r in op["results"]:
            assert r["wrong"] == 0
            assert r["count"] * 4 == r["bytes"] and r["dtype"] == "float"
            assert r["algbw"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e-6))
            assert r["busbw"] == pytest.approx(r["algbw"] * factors[op["op"]])
        assert op["avg_busbw"] == pytest.approx(
            sum(r["busbw"] for r in op["results"]) / len(op["results"]))
    stdout = result.stdout
    assert "#       size         count      type   redop    root     time   algbw   busbw  #wrong" \
        in stdout
    assert "# Avg bus bandwidth    :" in stdout
    assert "Out of bounds values : 0 OK" in stdout
    # Only rank 0 prints the table: one header per measured collective.
    assert stdout.count("#wrong") == len(measured)


def test_bad_out_directory_stops_every_rank(tmp_path: Path) -> None:
    out = tmp_path / "missing-dir" / "c.json"
    result = _torchrun("-b", "1K", "-e", "1K", "--out", str(out), "--ops", "all_reduce",
                       timeout=120)
    assert result.returncode != 0
    assert "does not exist" in result.stderr
    assert not out.parent.exists()


def test_bad_size_is_refused_before_any_rendezvous(tmp_path: Path) -> None:
    result = _torchrun("-b", "1KB", "-e", "1M", "--out", str(tmp_path / "c.json"), timeout=120)
    assert result.returncode != 0
    assert "not a sweep size" in result.stderr
    assert not (tmp_path / "c.json").exists()
