"""`ddpkit bench --quick` across a 2-node sim shaped to 1 Gbit: the results document is complete,
its numbers are physically sane, and `ddpkit plan --from-bench` reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from console_noise import assert_quiet_console
from multinode import ddpkit, start, wait_all

from ddpkit.sim import SimCluster, inspect
from ddpkit.sim.shaping import tbf_burst_bytes

pytestmark = [pytest.mark.root, pytest.mark.slow]

SHAPED = 1e9 / 8  # the sim's tc tbf rate, bytes/s


@pytest.mark.timeout(240)
def test_quick_bench_on_two_shaped_nodes(sim_cluster: Callable[..., SimCluster], run_cli,  # type: ignore[no-untyped-def]
                                         tmp_path: Path, assert_fits) -> None:
    cluster = sim_cluster(nodes=2, rate="1gbit")
    master = cluster.nodes[0].private_address
    port = "29500"  # inside the nodes' own network namespaces: nothing else listens there
    common = ("--quick", "--json", "--settings", "none,powersgd:1,accumulate:4", "--nnodes", "2",
              "--master-addr", master, "--master-port", port, "--env", "OMP_NUM_THREADS=1")
    runs = [start(cluster, i, ddpkit("bench", *common, "--node-rank", str(i), "--run-dir",
                                     str(tmp_path / f"node{i}"),
                                     *(("--csv", str(tmp_path / "bench.csv")) if i == 0 else ())))
            for i in range(2)]
    assert wait_all(runs, timeout=200), "ddpkit bench did not finish in time"
    # every torchrun, rank and TCP listener of the 4 jobs ended with its bench
    assert dict(inspect(cluster.name).processes) == {0: 0, 1: 0}
    for run in runs:
        assert run.code == 0, run.err[-3000:]
        assert_quiet_console(run.out, run.err)
        assert_fits(run.err)  # stdout is the JSON document
    worker = json.loads(runs[1].out)
    assert worker["schema"] == "ddpkit.bench-node/1" and worker["results_on"] == "node 0"
    assert all(job["ok"] for job in worker["jobs"])

    doc = json.loads(runs[0].out)
    assert doc["schema"] == "ddpkit.bench/1" and doc["ok"] is True
    assert (doc["cluster"]["nodes"], doc["cluster"]["gpus_per_node"]) == (2, 1)
    assert doc["cluster"]["interface"] == "eth1" and doc["cluster"]["backend"] == "gloo"

    tcp = doc["tcp"]
    assert sorted((p["src"], p["dst"], p["streams"]) for p in tcp["pairs"]) == [
        (0, 1, 1), (0, 1, 4), (1, 0, 1), (1, 0, 4)]
    for pair in tcp["pairs"]:
        assert pair["error"] is None and pair["bytes_per_s"] > 0
        assert pair["bytes_per_s"] < 1.1 * SHAPED  # tc caps it: this is the wire, not loopback
    assert {n["ifname"] for n in tcp["nodes"]} == {"eth1"}
    wire = tcp["wire_bytes_per_s"]

    rows = doc["collectives"]["ops"][0]["results"]
    assert doc["collectives"]["ops"][0]["op"] == "all_reduce" and rows
    assert all(r["wrong"] == 0 for r in rows)
    assert all(r["busbw"] > 0 for r in rows), rows
    # tc caps the wire: beyond a few tbf bursts no all_reduce can beat the shaped rate (smaller
    # messages may pass inside one burst at the veth's own speed, so they are not bounded here)
    burst = tbf_burst_bytes(int(SHAPED * 8))
    bounded = [r for r in rows if r["bytes"] >= 4 * burst]
    assert bounded and all(r["busbw"] < 1.25 * SHAPED for r in bounded), (burst, rows, wire)
    largest = max(rows, key=lambda r: r["bytes"])
    assert largest["busbw_over_tcp"] == pytest.approx(largest["busbw"] / wire)
    assert 0.3 < doc["inter_node"]["busbw_over_tcp"] < 1.1

    scaling = {r["setting"]: r for r in doc["scaling"]}
    assert list(scaling) == ["none", "powersgd:1", "accumulate:4"]
    for row in scaling.values():
        assert row["ok"] is True, row
        assert 0 < row["efficiency"] <= 1.5 and row["step_s"] > 0
    assert doc["single_node"]["step_s"] > 0 and "powersgd:1" in doc["single_node"]["hook_step_s"]
    rec = doc["recommendation"]
    # advice, or an honest "undecided" where the bench's own sanity check failed (a loaded
    # machine's noise), saying so and to repeat the run: never undecided for another reason
    assert rec["decision"] in ("go-multi-node", "stay-on-one-node") or (
        rec["decision"] == "undecided" and rec.get("repeat")
        and "sanity check" in rec["text"]), rec

    results = tmp_path / "node0" / "bench.json"
    assert json.loads(results.read_text()) == doc
    assert (tmp_path / "bench.csv").read_text().startswith("section,name,")
    planned = run_cli("plan", "--from-bench", str(results), "--json")
    assert planned.code == 0, planned.err
    measured = {s["setting"]: s["measured_efficiency"] for s in planned.json()["settings"]}
    assert measured["none"] is not None and measured["accumulate:4"] is not None
