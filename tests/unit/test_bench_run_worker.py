"""The bench's worker programs: their pure parts, and real runs as two torchrun "nodes" on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ddpkit.bench.planning.model import parse_setting as plan_setting
from ddpkit.workers.scaling import hook_label, mlp_shape, parse_setting
from ports import free_port


@pytest.mark.parametrize("params, shape", [(25_000_000, (2048, 6)), (4_000_000, (1024, 4)),
                                           (2_000, (64, 0 + 1)), (10**9, (4096, 60))])
def test_mlp_shape_is_close_to_the_requested_size(params: int, shape: tuple[int, int]) -> None:
    width, depth = mlp_shape(params)
    assert (width, depth) == shape
    if params >= 1_000_000:
        assert abs(depth * (width * width + width) - params) / params < 0.2


@pytest.mark.parametrize("label", ["none", "bf16", "fp16", "powersgd:1", "powersgd:4",
                                   "accumulate:4", "bf16+accumulate:4", "powersgd:2+accumulate:8"])
def test_the_worker_reads_settings_as_plan_does(label: str) -> None:
    hook, rank, accumulate = parse_setting(label)
    setting = plan_setting(label)
    assert (hook, rank, accumulate) == (setting.compression, setting.powersgd_rank,
                                        setting.accumulate)
    assert hook_label(hook, rank) == setting.hook_spec


def test_the_worker_refuses_unknown_settings() -> None:
    with pytest.raises(ValueError):
        parse_setting("powersgd:x")




def _two_node_job(module: str, *args: str, timeout: float = 150) -> list[str]:
    """Run ``module`` as 2 torchrun "nodes" x 1 rank on loopback; prove nothing survives."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_"))}
    env.update({"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"})
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
         "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", str(port),
         "--rdzv-backend", "static", "-m", module, *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True) for node in (0, 1)]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    left = [p for p in psutil.process_iter(["pid"]) if _in_sessions(p, {q.pid for q in procs})]
    assert left == [], f"left behind: {left}"
    for proc, out in zip(procs, outputs):
        assert proc.returncode == 0, out[-3000:]
    return outputs


def _in_sessions(proc: psutil.Process, sids: set[int]) -> bool:
    try:
        return os.getsid(proc.pid) in sids and proc.status() != psutil.STATUS_ZOMBIE
    except (ProcessLookupError, psutil.Error, PermissionError):
        return False


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_scaling_worker_measures_one_node_and_both_nodes(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    _two_node_job("ddpkit.workers.scaling", "--setting", "powersgd:1+accumulate:2", "--params",
                  "300000", "--batch", "8", "--steps", "4", "--warmup", "1", "--out", str(out))
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ddpkit.scaling-run/1" and doc["ok"] is True
    assert doc["nodes"] == 2 and doc["ranks_per_node"] == [1, 1]
    one = doc["phases"]["one_node"]
    assert sorted(one) == ["none", "powersgd:1"]
    none = one["none"]
    assert len(none["per_node_step_s"]) == 2 and none["detail"]["ranks"] == 1
    threads = none["per_node_threads"]  # each node's threads: a run that differs is named
    assert len(threads) == 2 and all(isinstance(count, int) and count >= 1 for count, _ in threads)
    assert none["step_s"] == pytest.approx((none["before_step_s"] + none["after_step_s"]) / 2)
    psgd = one["powersgd:1"]["detail"]
    assert psgd["hook"] == "powersgd:1:warmup=2" and psgd["bucket_cap_mb"] >= 1  # one Gloo bucket
    assert psgd["warmup_micro_steps"] == 4  # warm-up outlasts start_powerSGD_iter
    multi = doc["phases"]["all_nodes"]
    assert multi["ranks"] == 2 and multi["accumulate"] == 2
    assert multi["timed_micro_steps"] == 4 and multi["warmup_micro_steps"] == 8
    assert multi["ok"] and multi["problems"] == [] and multi["step_s"] > 0
    assert multi["samples_per_s"] == pytest.approx(2 * 8 / multi["step_s"])
    assert Path(f"{out}.stage").read_text().strip() == "done"


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_tcp_baseline_worker_measures_both_directions(tmp_path: Path) -> None:
    out = tmp_path / "tcp.json"
    outputs = _two_node_job("ddpkit.workers.tcp_baseline", "--seconds", "0.3", "--streams", "1,2",
                            "--max-bytes", str(64 << 20), "--out", str(out))
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ddpkit.tcp-baseline/1"
    assert [(n["node"], n["ifname"], n["address"]) for n in doc["nodes"]] == [
        (0, "lo", "127.0.0.1"), (1, "lo", "127.0.0.1")]
    assert [(p["src"], p["dst"], p["streams"]) for p in doc["pairs"]] == [
        (0, 1, 1), (0, 1, 2), (1, 0, 1), (1, 0, 2)]
    assert all(p["error"] is None and p["bytes_per_s"] > 0 for p in doc["pairs"])
    assert all(p["bytes"] <= 64 << 20 for p in doc["pairs"])
    assert "# tcp node 0 -> node 1, 1 stream(s):" in outputs[0]
