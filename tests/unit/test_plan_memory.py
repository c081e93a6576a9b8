"""The memory model and per-strategy traffic, against the numbers their sources state.

Expected values come from the papers and docs (docs/plan.md, "Memory model"), not from the code:
ZeRO's Figure 1 (7.5B parameters, 64 GPUs, K = 12), DDP's bucket copy (torch docs on
``gradient_as_bucket_view``), FSDP2's fp32 shards, QLoRA's 4.127 bits per parameter, LoRA's
r(d_in + d_out), Korthikanti et al.'s 34 s b h bytes per layer.
"""

from __future__ import annotations

import pytest

from ddpkit.bench.planning.gpus import GIB, MIB, find_gpu, usable_bytes
from ddpkit.bench.planning.memory import MemoryInput, activation_bytes, lora_params, memory
from ddpkit.bench.planning.strategies import Link, evaluate_strategies, fastest, traffic
from ddpkit.errors import DdpkitError

ZERO_FIG1 = MemoryInput(params=7_500_000_000, nodes=8, gpus_per_node=8, grad_bytes=2,
                        optimizer="adam")


def _states(strategy: str, inp: MemoryInput = ZERO_FIG1) -> float:
    m = memory(inp, strategy)  # type: ignore[arg-type]
    return m.weights + m.gradients + m.optimizer


@pytest.mark.parametrize(("strategy", "gigabytes"), [
    ("ddp", 120.0),  # "Baseline": (2 + 2 + K) x Psi = 16 x 7.5B
    ("zero1", 31.4),  # P_os: 2Psi + 2Psi + K Psi / N_d
    ("zero2", 16.6),  # P_os+g: 2Psi + (2 + K) Psi / N_d
    ("fsdp", 1.9),  # P_os+g+p (ZeRO-3): (2 + 2 + K) Psi / N_d
])
def test_zero_paper_figure_1(strategy: str, gigabytes: float) -> None:
    assert _states(strategy) / 1e9 == pytest.approx(gigabytes, abs=0.05)


def test_ddp_keeps_a_bucket_copy_of_the_gradients() -> None:
    m = memory(ZERO_FIG1, "ddp")
    assert m.buffers == 7_500_000_000 * 2  # gradient_as_bucket_view=False: one more gradient size


def test_fsdp_and_hsdp_shard_fp32_state_over_their_groups() -> None:
    inp = MemoryInput(params=1_000_000, nodes=2, gpus_per_node=2, grad_bytes=4, optimizer="adam")
    # fp32 Adam: 4 weights + 4 gradients + 8 state per parameter, over the shard group.
    assert _states("fsdp", inp) == pytest.approx(16 * 1_000_000 / 4)
    assert _states("hsdp", inp) == pytest.approx(16 * 1_000_000 / 2)  # shard inside a node only
    assert memory(inp, "hsdp").shard_group == 2 and memory(inp, "fsdp").shard_group == 4
    assert _states("ddp", inp) == pytest.approx(16 * 1_000_000)
    sgd = MemoryInput(params=1_000_000, nodes=1, gpus_per_node=1, grad_bytes=4, optimizer="sgd")
    assert _states("ddp", sgd) == pytest.approx(12 * 1_000_000)  # one momentum buffer


def test_offload_moves_optimizer_state_to_host() -> None:
    on_gpu, off = memory(ZERO_FIG1, "zero2"), memory(ZERO_FIG1, "zero2+offload")
    fp32_grads = 4 * 7_500_000_000 / 64  # DeepSpeed steps an fp32 copy of the gradient shard
    assert off.optimizer == 0 and off.host == pytest.approx(on_gpu.optimizer + fp32_grads)
    held = 2 * 7_500_000_000 * (1 - 1 / 64)  # ZeRO-Offload streams gradients, none held whole
    assert off.total == pytest.approx(on_gpu.total - on_gpu.optimizer - fp32_grads - held)
    full = memory(ZERO_FIG1, "fsdp+offload")
    assert full.weights == full.gradients == full.optimizer == 0
    assert full.host == pytest.approx(16 * 7_500_000_000 / 64)


def test_lora_and_qlora() -> None:
    inp = MemoryInput(params=7_000_000_000, nodes=1, gpus_per_node=1, grad_bytes=2, layers=32,
                      hidden=4096, lora_rank=16, optimizer="adam")
    h, r = 4096, 16
    per_layer = 4 * r * (h + h) + r * (h + 4 * h) + r * (4 * h + h)  # q k v o, up, down
    assert lora_params(inp) == 32 * per_layer
    q = memory(inp, "qlora")
    adapters = lora_params(inp)
    # Frozen base in NF4 with double quantization: 4 + 0.127 bits per parameter; QLoRA's
    # adapters in bf16 (2 bytes), LoRA's in fp32 (peft's default).
    assert q.weights - 2 * adapters == pytest.approx(7e9 * 4.127 / 8)
    assert memory(inp, "lora").weights - 4 * adapters == pytest.approx(7e9 * 2)
    assert q.trainable == adapters and q.optimizer == 8 * adapters


def test_activations_follow_korthikanti() -> None:
    s, b, h, layers = 2048, 1, 4096, 32
    inp = MemoryInput(params=7_000_000_000, nodes=1, gpus_per_node=1, grad_bytes=2,
                      layers=layers, hidden=h, micro_batch=b, seq_len=s)
    assert activation_bytes(inp) == 34 * s * b * h * layers  # 16-bit, fused attention
    ckpt = MemoryInput(**{**inp.__dict__, "checkpointing": True})
    assert activation_bytes(ckpt) == 2 * s * b * h * layers + 34 * s * b * h
    assert activation_bytes(MemoryInput(params=1, nodes=1, gpus_per_node=1)) is None


def test_traffic_volumes_match_the_zero_paper() -> None:
    """ZeRO-1/2 move DDP's 2 Psi, ZeRO-3/FSDP 3 Psi; HSDP crosses nodes with DDP's volume."""
    inp = MemoryInput(params=1_000_000_000, nodes=2, gpus_per_node=8, grad_bytes=2)
    ring = Link(inter_node=1.25e9, intra_node=10e9, overlap=0.0, algorithm="flat-ring")
    ddp, _ = traffic(inp, "ddp", ring, 2)
    k = 16
    assert ddp == pytest.approx(2 * (k - 1) / k * 2e9)
    assert traffic(inp, "zero2", ring, 2)[0] == pytest.approx(ddp)
    assert traffic(inp, "fsdp", ring, 2)[0] == pytest.approx(1.5 * ddp)
    tree = Link(inter_node=1.25e9, intra_node=10e9, overlap=0.0)
    assert traffic(inp, "hsdp", tree, 2)[0] == pytest.approx(2 * (2 - 1) / 2 * 2e9)
    assert traffic(inp, "hsdp", tree, 2)[0] == pytest.approx(traffic(inp, "ddp", tree, 2)[0])
    assert traffic(inp, "fsdp", tree, 1)[0] == 0.0  # one node: nothing crosses


def test_gloo_traffic_is_counted_as_gloo_runs_it() -> None:
    """Gloo: DDP's all-reduce one ring over all k ranks, reduce-scatter a whole all-reduce (the sim
    measured 50.5 MB and 101.0 MB per step for an 8.4M-parameter fp32 model, docs/plan.md)."""
    inp = MemoryInput(params=8_400_000, nodes=2, gpus_per_node=2, grad_bytes=4)
    nccl = Link(inter_node=125e6, intra_node=20e9, overlap=0.0)
    gloo = Link(inter_node=125e6, intra_node=20e9, overlap=0.0, backend="gloo")
    p, k = 8.4e6, 4
    assert traffic(inp, "ddp", nccl, 2)[0] == pytest.approx(p * 4)  # hierarchical: 2(N-1)/N
    assert traffic(inp, "ddp", gloo, 2)[0] == pytest.approx(2 * (k - 1) / k * p * 4)  # 50.4 MB
    assert traffic(inp, "fsdp", nccl, 2)[0] == pytest.approx((k - 1) / k * p * 12)
    assert traffic(inp, "fsdp", gloo, 2)[0] == pytest.approx((k - 1) / k * p * 16)  # 100.8 MB
    assert traffic(inp, "hsdp", gloo, 2)[0] == pytest.approx(traffic(inp, "hsdp", nccl, 2)[0])


def test_efficiency_is_against_the_same_strategy_and_never_above_one() -> None:
    inp = MemoryInput(params=7_000_000_000, nodes=2, gpus_per_node=8, grad_bytes=2)
    link = Link(inter_node=1.25e9, intra_node=10e9, overlap=0.7)
    for r in evaluate_strategies(inp, link, 1.5, usable_bytes(24 * GIB)):
        assert r.efficiency is not None and 0 < r.efficiency <= 1.0
        assert r.step_one_node_s is not None and r.step_s is not None
        assert r.efficiency == pytest.approx(r.step_one_node_s / r.step_s)


def test_fastest_prefers_full_training_without_offload() -> None:
    inp = MemoryInput(params=7_000_000_000, nodes=2, gpus_per_node=8, grad_bytes=2)
    link = Link(inter_node=1.25e9, intra_node=10e9, overlap=0.7)
    results = evaluate_strategies(inp, link, 1.5, usable_bytes(24 * GIB))
    one = fastest(results, one_node=True)
    assert one is not None and one.strategy == "fsdp"  # 16 B x 7B / 8 = 14 GB + working set
    tiny = evaluate_strategies(inp, link, 1.5, 5 * GIB)
    pick = fastest(tiny, one_node=False)
    assert pick is not None and pick.strategy == "fsdp+offload"  # nothing else fits 5 GiB
    assert fastest(evaluate_strategies(inp, link, 1.5, 10 * MIB), one_node=False) is None


def test_gpu_table() -> None:
    assert find_gpu("RTX 4090").memory_bytes == 24564 * MIB
    assert find_gpu("A100").name == "a100-80gb"
    assert find_gpu("h200").memory_bytes > find_gpu("H100").memory_bytes
    with pytest.raises(DdpkitError) as info:
        find_gpu("gtx 1080")
    assert info.value.error_id == "unknown-gpu"
