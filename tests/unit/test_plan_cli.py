"""`ddpkit plan` end to end through the CLI: table, verdict, --json, errors, no torch import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ddpkit.errors import ExitCode

SIM = ["plan", "--params", "21M", "--nodes", "2", "--inter-node", "1Gbit",
       "--step-compute", "291ms", "--overlap", "0"]


def test_human_output_has_table_and_verdict(run_cli) -> None:
    result = run_cli(*SIM)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = next(line for line in lines if line.startswith("setting"))
    for column in ("payload", "comm", "exposed", "step", "efficiency", "vs 1 node"):
        assert column in header
    plain = next(line for line in lines if line.startswith("none "))
    assert "30%" in plain and "672 ms" in plain
    assert "weak scaling" in result.out
    verdict = [line for line in lines if line.startswith(("go multi-node", "stay on one node"))]
    assert len(verdict) == 1


def test_json_document(run_cli) -> None:
    result = run_cli(*SIM, "--json", "--settings", "fp16,accumulate:4")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "ddpkit.plan/2"
    assert doc["inputs"]["inter_node_bytes_per_s"] == 125e6
    assert doc["inputs"]["step_compute_s"] == 0.291
    assert [s["setting"] for s in doc["settings"]] == ["none", "fp16", "accumulate:4"]
    fp16 = doc["settings"][1]
    assert fp16["payload_bytes"] == 42e6
    assert abs(fp16["efficiency"] - 0.291 / (0.291 + 0.336)) < 1e-9
    assert doc["verdict"]["decision"] in ("go-multi-node", "stay-on-one-node")
    assert doc["sources"]["params"] == "flag"


def test_seven_billion_on_25gbit_stays_on_one_node(run_cli) -> None:
    result = run_cli("plan", "--params", "7B", "--nodes", "2", "--gpus-per-node", "8",
                     "--inter-node", "25Gbit", "--intra-node", "300GB/s", "--step-compute", "0.8s",
                     "--settings", "bf16,accumulate:4", "--json")
    doc = result.json()
    assert doc["verdict"]["decision"] == "stay-on-one-node"
    assert doc["settings"][0]["comm_s"] > 9.0  # 28 GB of fp32 gradients over 3.125 GB/s


def test_torchrun_spelling_of_flags(run_cli) -> None:
    result = run_cli("plan", "--params", "21M", "--inter_node", "1Gbit", "--step_compute", "0.3",
                     "--json")
    assert result.code == 0, result.err
    assert result.json()["inputs"]["step_compute_s"] == 0.3


def test_bad_rate_is_a_usage_error(run_cli) -> None:
    result = run_cli("plan", "--params", "7B", "--inter-node", "25")
    assert result.code == ExitCode.USAGE
    assert "error [bad-rate]" in result.err and "fix:" in result.err
    assert result.out == ""


def test_params_and_model_bytes_exclude_each_other(run_cli) -> None:
    result = run_cli("plan", "--params", "7B", "--model-bytes", "14GB", "--inter-node", "1Gbit")
    assert result.code == ExitCode.USAGE


def test_from_bench(run_cli, tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({
        "schema": "ddpkit.bench/1",
        "model": {"params": 21_000_000, "grad_dtype": "fp32"},
        "cluster": {"nodes": 2, "gpus_per_node": 1, "backend": "gloo", "device": "cpu"},
        "inter_node": {"busbw_bytes_per_s": 0.98e9 / 8},
        "single_node": {"step_s": 0.291},
        "scaling": [{"setting": "none", "nodes": 2, "step_s": 0.99}],
    }))
    result = run_cli("plan", "--from-bench", str(bench))
    assert result.code == 0, result.err
    assert "measured" in result.out
    doc = run_cli("plan", "--from-bench", str(bench), "--json").json()
    assert doc["sources"]["inter_node"] == "bench"
    assert abs(doc["settings"][0]["measured_efficiency"] - 0.291 / 0.99) < 1e-9
    # predicted vs measured for plain DDP on the CPU sim: within 20%
    assert abs(doc["settings"][0]["efficiency"] / doc["settings"][0]["measured_efficiency"] - 1) < 0.2


def test_a_gloo_bench_costs_the_strategies_on_gloo_unless_a_gpu_is_named(run_cli,
                                                                          tmp_path: Path) -> None:
    def bench(backend: str) -> str:
        path = tmp_path / f"{backend}.json"
        path.write_text(json.dumps({
            "schema": "ddpkit.bench/1", "model": {"params": 21_000_000, "grad_dtype": "fp32"},
            "cluster": {"nodes": 2, "gpus_per_node": 1, "backend": backend, "device": "cpu"},
            "inter_node": {"busbw_bytes_per_s": 0.98e9 / 8}, "single_node": {"step_s": 0.291}}))
        return str(path)

    def strategies(*args: str) -> list[dict[str, object]]:
        doc = run_cli("plan", "--from-bench", *args, "--json").json()
        return list(doc["memory"]["strategies"])

    # the measured cluster ran Gloo: its sharded strategies are costed as Gloo runs them
    assert strategies(bench("gloo")) != strategies(bench("nccl"))
    # a plan for GPUs (--gpu) is for NCCL whatever backend measured the link
    assert strategies(bench("gloo"), "--gpu", "H100") == strategies(bench("nccl"), "--gpu", "H100")


def test_missing_bench_file_is_a_config_error(run_cli, tmp_path: Path) -> None:
    result = run_cli("plan", "--from-bench", str(tmp_path / "nope.json"), "--json")
    assert result.code == ExitCode.CONFIG
    assert result.json()["error"]["id"] == "bench-unreadable"


def test_plan_does_not_import_torch() -> None:
    code = (
        "import sys, io\n"
        "from ddpkit.cli.main import main\n"
        "from ddpkit.cli.output.console import Console\n"
        "rc = main(['plan', '--params', '7B', '--inter-node', '25Gbit', '--json'],"
        " Console(out=io.StringIO(), err=io.StringIO(), color=False))\n"
        "assert rc == 0, rc\n"
        "assert 'torch' not in sys.modules, 'plan imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
