"""What of each strategy's communication plan lets hide behind compute: DDP's buckets as torch's
Reducer fills them, nothing for FSDP on Gloo (blocking collectives on CPU), the overlap fraction on
NCCL within the buckets' bound; and the bench's measured intra-node rate in the prediction."""

from __future__ import annotations

from typing import Any

import pytest

from ddpkit.bench.planning.memory import MemoryInput
from ddpkit.bench.planning.strategies import (
    DDP_BUCKET_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    Link,
    ddp_buckets,
    exposed_comm,
)
from ddpkit.bench.strategy_rows import intra_node_rate, predict

MIB = 1024 * 1024
LAYER = 1024 * 1024 * 4 + 1024 * 4  # one 1024-wide Linear in fp32, weight and bias


def test_ddp_buckets_fill_in_reverse_with_a_small_first_bucket() -> None:
    assert (DDP_FIRST_BUCKET_BYTES, DDP_BUCKET_BYTES) == (MIB, 25 * MIB)  # torch's defaults
    # 8 layers of 4.2 MB (the sim's MLP): the last layer closes the 1 MiB bucket; the other 7
    # reach 25 MiB only with the 7th (6 x 4.2 MB = 25.2 MB < 26.2 MB)
    assert ddp_buckets([LAYER] * 8) == [LAYER, 7 * LAYER]
    # forward order in, readiness order out: the small last tensor opens the first bucket
    assert ddp_buckets([30 * MIB, 2 * MIB, 0.5 * MIB]) == [2.5 * MIB, 30 * MIB]
    assert ddp_buckets([0.25 * MIB] * 2) == [0.5 * MIB]  # under every cap: one bucket
    assert sum(ddp_buckets([3 * MIB] * 100)) == 300 * MIB


def _inp(params: int, layers: int, nodes: int = 2) -> MemoryInput:
    return MemoryInput(params=params, nodes=nodes, gpus_per_node=2, grad_bytes=4, layers=layers,
                       hidden=1024, optimizer="adam")


def test_gloo_hides_ddps_earlier_buckets_behind_the_rest_of_backward_and_nothing_for_fsdp() -> None:
    inp = _inp(8 * (1024 * 1024 + 1024), 8)
    gloo = Link(117e6, 1e9, 0.0, backend="gloo")
    # the last bucket (7 of 8 layers) is exposed; the first hides while backward lasts
    assert exposed_comm(inp, "ddp", gloo, 0.4, 10.0) == pytest.approx(0.4 * 7 / 8)
    # ... but only behind the backward that follows it: 2/3 of compute x 7/8 of the layers
    compute = 0.03
    assert exposed_comm(inp, "ddp", gloo, 0.4, compute) == pytest.approx(
        0.4 - 2 / 3 * compute * 7 / 8)
    for strategy in ("fsdp", "hsdp", "zero2"):
        assert exposed_comm(inp, strategy, gloo, 0.4, 10.0) == 0.4
    assert exposed_comm(inp, "ddp", gloo, 0.0, 10.0) == 0.0


def test_nccl_keeps_the_overlap_fraction_within_the_buckets_bound() -> None:
    nccl = Link(50e9, 300e9, 0.7)
    big = _inp(7_000_000_000, 32)  # 28 GB of gradients: the last bucket is a sliver
    assert exposed_comm(big, "ddp", nccl, 2.0, 5.0) == pytest.approx(2.0 - 0.7 * 2.0)
    assert exposed_comm(big, "fsdp", nccl, 2.0, 5.0) == pytest.approx(2.0 - 0.7 * 2.0)
    # one 4.2 MB layer in each of two buckets of 1 and 7 layers: only 1/8 can hide, not 0.7
    small = _inp(8 * (1024 * 1024 + 1024), 8)
    assert exposed_comm(small, "ddp", nccl, 0.4, 10.0) == pytest.approx(0.4 * 7 / 8)


def _doc(seconds: list[float | None]) -> dict[str, Any]:
    phases = {k: {"intra_allreduce": None if s is None else {"bytes": 40e6, "seconds": s}}
              for k, s in zip(("one_node", "all_nodes", "one_node_again"), seconds, strict=True)}
    return {"ranks_per_node": 2, "phases": phases}


def test_the_measured_intra_node_rate_is_the_busbw_of_the_one_node_phases() -> None:
    # 2 ranks: busbw = 2 (G-1)/G x bytes / mean time = 40 MB / 0.04 s
    assert intra_node_rate(_doc([0.03, None, 0.05])) == pytest.approx(1e9)
    assert intra_node_rate(_doc([None, None, 0.02])) == pytest.approx(2e9)
    assert intra_node_rate(_doc([None, None, None])) is None
    assert intra_node_rate({"ranks_per_node": 1, "phases": {}}) is None


def test_a_slower_intra_node_rate_leaves_less_compute_and_ddp_runs_at_the_slower_hop() -> None:
    shape = {"params": 8 * (1024 * 1024 + 1024), "width": 1024, "depth": 8, "nodes": 2,
             "ranks_per_node": 2, "one_node_step_s": 0.5}
    fast = predict("ddp", **shape, link=Link(117e6, 20e9, 0.0, backend="gloo"))
    slow = predict("ddp", **shape, link=Link(117e6, 0.5e9, 0.0, backend="gloo"))
    # the 1-node step holds the node's own all-reduce: at 0.5 GB/s more of it is communication
    assert slow["one_node_comm_s"] > 30 * fast["one_node_comm_s"]
    assert slow["compute_s"] < fast["compute_s"]
    # Gloo's one ring over 4 ranks moves at its slowest hop: the 1 Gbit link either way
    assert slow["comm_s"] == pytest.approx(fast["comm_s"])
    assert slow["step_s"] < fast["step_s"]
    # HSDP's node-local collectives are in both steps: the intra-node rate cancels out
    h_fast = predict("hsdp", **shape, link=Link(117e6, 20e9, 0.0, backend="gloo"))
    h_slow = predict("hsdp", **shape, link=Link(117e6, 0.5e9, 0.0, backend="gloo"))
    assert h_slow["step_s"] == pytest.approx(h_fast["step_s"])
