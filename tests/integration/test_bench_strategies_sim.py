"""`ddpkit bench --strategies ddp,fsdp,hsdp` on a 2-node x 2-rank sim shaped to 1 Gbit: the rows
exist, their memory is what sharding must give, the link carried the traffic, and the step time is
recorded beside plan's prediction (issue 34's target: within +-25% in 8 of 9 runs, which one run
cannot show: `benchmarks/strategies_sim.py` repeats it; docs/bench.md has the figures)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from multinode import ddpkit, start, wait_all

from ddpkit.sim import SimCluster, inspect

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.mark.timeout(420)
def test_strategies_on_two_nodes_of_two_ranks(sim_cluster: Callable[..., SimCluster],
                                              tmp_path: Path,
                                              record_property: Callable[[str, Any], None]) -> None:
    cluster = sim_cluster(nodes=2, rate="1gbit")
    master = cluster.nodes[0].private_address
    port = "29500"  # inside the nodes' own network namespaces: nothing else listens there
    common = ("--quick", "--json", "--collectives", "--strategies", "ddp,fsdp,hsdp",
              "--params", "8M", "--batch", "8", "--nnodes", "2", "--nproc-per-node", "2",
              "--master-addr", master, "--master-port", port, "--env", "OMP_NUM_THREADS=1")
    runs = [start(cluster, i, ddpkit("bench", *common, "--node-rank", str(i), "--run-dir",
                                     str(tmp_path / f"node{i}")))
            for i in range(2)]
    assert wait_all(runs, timeout=380), "ddpkit bench did not finish in time"
    assert dict(inspect(cluster.name).processes) == {0: 0, 1: 0}  # every rank ended
    for run in runs:
        assert run.code == 0, run.err[-3000:]
    doc = json.loads(runs[0].out)
    assert doc["schema"] == "ddpkit.bench/1" and doc["ok"] is True
    block = doc["strategies"]
    assert block["link"]["basis"].startswith("all_reduce busbw") and block["link"]["overlap"] == 0
    rows = {r["strategy"]: r for r in block["rows"]}
    assert list(rows) == ["ddp", "fsdp", "hsdp"]
    for row in rows.values():
        assert row["ok"] is True, row
        assert (row["nodes"], row["ranks_per_node"]) == (2, 2)
        got, plan = row["measured"], row["predicted"]
        assert got["step_s"] > 0 and got["one_node_step_s"] > 0 and plan["step_s"] > 0
        # the 1-node reference alternated with the 2-node steps, and plan's intra-node rate is
        # the node's own all-reduce, measured (Gloo over loopback: well under plan's 20 GB/s)
        assert len(got["one_node_steps_s"]) == 2
        assert 0 < plan["intra_node_bytes_per_s"] < 20e9
        # the tensors are exactly what sharding leaves on a rank: 16 bytes per parameter of Adam
        # over the shard group (plus Adam's step counters, 4 bytes per tensor)
        assert row["ratio"]["state"] == pytest.approx(1.0, rel=0.01), row
        # every rank's peak resident memory covers at least its own tensors
        assert got["peak_rss_delta"] is None or got["peak_rss_delta"] > 0.5 * got["state_bytes"]
        # the shaped link carried the inter-node traffic (counted on eth1, Gloo's interface)
        assert got["link_bytes_per_step"] > 0.5 * plan["link_bytes_per_step"], row
    # Gloo's traffic across the node link, as counted on eth1, is plan's count for a Gloo run
    # (block["link"]["backend"]): HSDP's cross-node all-reduce of shards, DDP's one ring over all
    # 4 ranks, FSDP's reduce-scatter run as a whole all-reduce
    assert block["link"]["backend"] == "gloo"
    for name in ("ddp", "fsdp", "hsdp"):
        assert rows[name]["ratio"]["link_bytes"] == pytest.approx(1.0, abs=0.15), name
    state = {s: rows[s]["measured"]["state_bytes"] for s in rows}
    assert state["fsdp"] < state["hsdp"] < state["ddp"]
    assert rows["fsdp"]["measured"]["link_bytes_per_step"] > \
        rows["hsdp"]["measured"]["link_bytes_per_step"]
    for name, row in rows.items():
        record_property(f"{name}_step_measured_over_plan", row["ratio"]["step"])
        record_property(f"{name}_link_bytes_measured_over_plan", row["ratio"]["link_bytes"])
        print(f"{name}: 1-node {row['measured']['one_node_step_s']:.3f} s, 2-node "
              f"{row['measured']['step_s']:.3f} s, plan {row['predicted']['step_s']:.3f} s, "
              f"ratio {row['ratio']['step']:.2f} ({row['ratio']['step_at_measured_bytes']:.2f} "
              f"with the bytes measured); link {row['ratio']['link_bytes']:.2f} of plan's")
        record_property(f"{name}_step_measured_over_plan_at_measured_bytes",
                        row["ratio"]["step_at_measured_bytes"])
    assert json.loads((tmp_path / "node0" / "bench.json").read_text()) == doc
