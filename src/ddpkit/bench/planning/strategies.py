"""Which training strategy fits in GPU memory, what it sends across nodes, and which to run.

Pure: builds on :mod:`ddpkit.bench.planning.memory` (bytes per GPU) and the plan's bandwidth and overlap
model (:mod:`ddpkit.bench.planning.model`). Per step and per node, through the node's network link
(docs/plan.md, "Traffic per strategy"):

* DDP (and LoRA, over its adapters): one all-reduce of the gradients, the plan's all-reduce model.
* ZeRO-1/2: reduce-scatter of the gradients + all-gather of the updated weights (ZeRO paper: the
  same 2 x Psi volume as DDP's all-reduce).
* FSDP / ZeRO-3: all-gather of the weights in forward and again in backward + reduce-scatter of the
  gradients (1.5 x DDP's volume in the ZeRO paper's units).
* These all-gathers and reduce-scatters span all N x G ranks; NCCL runs them as rings, so each
  node's link carries ``(k-1)/k`` of the buffer per collective (k = N x G), at the slower of the
  two links.
* HSDP: all-gathers and reduce-scatters stay inside a node; across nodes, each GPU all-reduces its
  1/G shard of the gradients with its peers: ``2(N-1)/N x gradients`` per node, DDP's volume.
* On Gloo (``Link.backend``): DDP's all-reduce is one ring over all ranks (``flat-ring``) and a
  reduce-scatter is a whole all-reduce (twice a ring reduce-scatter's bytes); measured on the sim.
* CPU offload costs time: the copies over each GPU's PCIe link per step (ZeRO-Offload: the
  gradient shard down, the updated 16-bit shard up; FSDP's ``CPUOffloadPolicy``: the fp32 shard up
  for forward and again for backward, the fp32 gradient shard down) at ``Link.pcie``, plus the
  optimizer step on the node's CPUs at ``Link.cpu_optimizer`` parameters per second, not hidden.
  Offloaded state must fit the node's host memory.

What of that communication hides behind compute (docs/plan.md, "Overlap per strategy"):

* DDP (and LoRA): torch's Reducer all-reduces bucket by bucket while backward runs, buckets filled
  in reverse parameter order, the first capped at 1 MiB (``dist._DEFAULT_FIRST_BUCKET_BYTES``), the
  rest at ``bucket_cap_mb`` = 25 MiB (``compute_bucket_assignment_by_size``: a bucket closes when it
  reaches its cap). The last bucket is ready only when backward ends, so its all-reduce never
  hides; the others can hide behind the backward that follows the first bucket (backward = 2/3 of
  forward + backward). On NCCL plan's overlap fraction applies within that bound; on Gloo the
  Reducer's async work runs on Gloo's own threads while autograd continues, so the bound itself.
* FSDP / HSDP / ZeRO: on NCCL the overlap fraction (FSDP prefetches the next unit's all-gather and
  reduce-scatters on their own CUDA streams). On Gloo (CPU), none: FSDP's "streams" on CPU are the
  calling thread and its all-gathers and reduce-scatters are blocking calls (torch's
  ``_fsdp_param_group.py`` and ``_fsdp_collectives.py``: no ``async_op``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ddpkit.bench.planning.memory import (
    ADAPTER_STRATEGIES,
    OFFLOAD_STRATEGIES,
    STRATEGIES,
    Memory,
    MemoryInput,
    Strategy,
    embedding_params,
    lora_params,
    memory,
)
from ddpkit.bench.planning.model import allreduce_seconds, exposed_seconds

# Rules of thumb, stated in the output and overridable (docs/plan.md, "CPU offload"): pinned copies
# over PCIe 4.0 x16 reach 20-25 GB/s, pageable ones and GPUs sharing a root complex far less;
# an Adam step on CPU runs from under 1e9 (torch) to a few 1e9 (DeepSpeed's CPU-Adam) params/s.
PCIE_BYTES_PER_S = 12e9
CPU_OPTIMIZER_PARAMS_PER_S = 1e9
HOST_USABLE = 0.9  # of the node's RAM for offloaded state: the OS and data loaders need the rest
# torch DDP's defaults (torch/nn/parallel/distributed.py): the first bucket, then bucket_cap_mb=25
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
DDP_BUCKET_BYTES = 25 * 1024 * 1024
BACKWARD_SHARE = 2 / 3  # of forward + backward: backward costs twice forward's FLOPs


@dataclass(frozen=True)
class Link:
    """The network the plan assumes (bytes/s) and how much of the communication can hide."""

    inter_node: float
    intra_node: float
    overlap: float
    algorithm: str = "hierarchical"  # the all-reduce model for DDP, LoRA and HSDP's cross-node step
    pcie: float = PCIE_BYTES_PER_S  # host <-> GPU copies, bytes/s per GPU (offload)
    cpu_optimizer: float = CPU_OPTIMIZER_PARAMS_PER_S  # optimizer step on one node's CPUs
    host_memory: int | None = None  # bytes of RAM per node; None: not checked
    backend: str = "nccl"  # "gloo": count Gloo's collectives as it runs them (see traffic())



@dataclass(frozen=True)
class StrategyResult:
    strategy: Strategy
    memory: Memory  # on N nodes
    memory_one_node: Memory
    fits: bool | None  # None: GPU memory unknown
    fits_one_node: bool | None
    shortfall: float  # bytes over the usable memory per GPU on N nodes (0 when it fits)
    inter_node_bytes: float  # per step, through one node's link (one direction)
    comm_s: float  # on N nodes
    comm_one_node_s: float
    step_s: float | None
    step_one_node_s: float | None
    efficiency: float | None  # same strategy: 1-node step / N-node step (weak scaling), <= 1
    offload_s: float = 0.0  # per step on N nodes: PCIe copies + CPU optimizer step
    offload_one_node_s: float = 0.0
    host_bytes: float = 0.0  # offloaded state per node on N nodes
    host_bytes_one_node: float = 0.0
    host_fits: bool | None = None  # None: no offload, or host memory unknown
    host_fits_one_node: bool | None = None

    @property
    def adapters_only(self) -> bool:
        return self.strategy in ADAPTER_STRATEGIES


def _ring(buffer: float, ranks: int) -> float:
    """Bytes one rank's link carries for an all-gather or reduce-scatter of ``buffer`` bytes."""
    return (ranks - 1) / ranks * buffer if ranks > 1 else 0.0


def traffic(inp: MemoryInput, strategy: Strategy, link: Link, nodes: int) -> tuple[float, float]:
    """(bytes through one node's link per step, communication seconds per step) on ``nodes``."""
    n, gpus = nodes, inp.gpus_per_node
    k = n * gpus
    p, g = float(inp.params), float(inp.grad_bytes)
    w = g  # weights are gathered in the compute dtype
    slowest = min(link.inter_node, link.intra_node) if (n > 1 and gpus > 1) else (
        link.inter_node if n > 1 else link.intra_node)

    gloo = link.backend == "gloo"

    def allreduce(size: float) -> tuple[float, float]:
        # Gloo's all-reduce is one ring over all ranks: NCCL's flat-ring count.
        algorithm = "flat-ring" if gloo else link.algorithm
        seconds = allreduce_seconds(size, n, gpus, link.inter_node, link.intra_node, algorithm)
        if n == 1:
            return 0.0, seconds
        ranks = k if algorithm == "flat-ring" else n
        return 2 * (ranks - 1) / ranks * size, seconds

    if strategy == "ddp":
        return allreduce(p * g)
    if strategy in ("lora", "qlora"):
        return allreduce(float(lora_params(inp)) * (2 if strategy == "qlora" else 4))
    # Gloo's reduce_scatter_tensor is a whole all-reduce, then the rank's chunk (torch's
    # ProcessGroupGloo): twice a ring reduce-scatter's bytes.
    scatter = 2 * g if gloo else g
    if strategy == "hsdp":
        intra = _ring(p * (2 * w + scatter), gpus) / link.intra_node
        if n == 1:
            return 0.0, intra
        across = 2 * (n - 1) / n * p * g
        return across, intra + across / link.inter_node
    gathered = p * (w + scatter) if strategy in ("zero1", "zero2", "zero2+offload") else (
        p * (2 * w + scatter))
    moved = _ring(gathered, k)
    return (moved if n > 1 else 0.0), moved / slowest if moved else 0.0


def offload_seconds(inp: MemoryInput, strategy: Strategy, link: Link, nodes: int) -> float:
    """PCIe copies per GPU plus the CPU optimizer step of one node, per step (0: no offload)."""
    if strategy not in OFFLOAD_STRATEGIES:
        return 0.0
    p, g = float(inp.params), float(inp.grad_bytes)
    ranks = nodes * inp.gpus_per_node
    shard = p / ranks
    copied = shard * (2 * g if strategy == "zero2+offload" else 3 * 4.0)
    return copied / link.pcie + shard * inp.gpus_per_node / link.cpu_optimizer


def ddp_buckets(tensor_bytes: list[float]) -> list[float]:
    """Bytes of each DDP bucket, in the order they become ready: ``tensor_bytes`` in forward
    (parameter) order, filled in reverse; a bucket closes once it reaches its cap (1 MiB for the
    first, 25 MiB after)."""
    buckets: list[float] = []
    current = 0.0
    for size in reversed(tensor_bytes):
        current += size
        if current >= (DDP_FIRST_BUCKET_BYTES if not buckets else DDP_BUCKET_BYTES):
            buckets.append(current)
            current = 0.0
    if current > 0:
        buckets.append(current)
    return buckets


def _ddp_tensor_bytes(inp: MemoryInput, strategy: Strategy) -> list[float]:
    """The reduced gradients in parameter order: the embeddings, then one tensor per block (the
    adapters of a block for LoRA)."""
    if strategy in ADAPTER_STRATEGIES:
        size = float(lora_params(inp)) * (2 if strategy == "qlora" else 4)
        return [size / max(1, inp.layers)] * max(1, inp.layers)
    embed = float(embedding_params(inp)) * inp.grad_bytes
    blocks = (float(inp.params) * inp.grad_bytes - embed) / max(1, inp.layers)
    return ([embed] if embed else []) + [blocks] * max(1, inp.layers)


def exposed_comm(inp: MemoryInput, strategy: Strategy, link: Link, comm: float,
                 compute: float) -> float:
    """Seconds of ``comm`` left on the critical path of a step with ``compute`` (module docstring)."""
    if strategy in ("ddp", *ADAPTER_STRATEGIES):
        buckets = ddp_buckets(_ddp_tensor_bytes(inp, strategy))
        total = sum(buckets)
        if not comm or total <= 0:
            return comm
        hideable = comm * (1 - buckets[-1] / total)
        backward = BACKWARD_SHARE * compute * (1 - buckets[0] / total)
        if link.backend == "gloo":
            return comm - min(hideable, backward)
        return comm - min(hideable, link.overlap * min(comm, compute))
    if link.backend == "gloo":
        return comm
    return exposed_seconds(comm, compute, link.overlap)


def _step(inp: MemoryInput, strategy: Strategy, link: Link, comm: float, compute: float | None,
          offload: float) -> float | None:
    return None if compute is None else (compute + exposed_comm(inp, strategy, link, comm, compute)
                                         + offload)


def _host_fits(host_bytes: float, link: Link) -> bool | None:
    if host_bytes <= 0 or link.host_memory is None:
        return None
    return host_bytes <= link.host_memory * HOST_USABLE


def evaluate_strategies(inp: MemoryInput, link: Link, compute_s: float | None,
                        usable_bytes: int | None) -> tuple[StrategyResult, ...]:
    """Every strategy on ``inp.nodes`` nodes and on one node, with whether it fits."""
    one = replace(inp, nodes=1)
    results = []
    for strategy in STRATEGIES:
        mem, mem_one = memory(inp, strategy), memory(one, strategy)
        host, host_one = mem.host * inp.gpus_per_node, mem_one.host * inp.gpus_per_node
        host_fits, host_fits_one = _host_fits(host, link), _host_fits(host_one, link)
        fits = None if usable_bytes is None else (mem.total <= usable_bytes
                                                  and host_fits is not False)
        fits_one = None if usable_bytes is None else (mem_one.total <= usable_bytes
                                                      and host_fits_one is not False)
        moved, comm = traffic(inp, strategy, link, inp.nodes)
        _, comm_one = traffic(inp, strategy, link, 1)
        off = offload_seconds(inp, strategy, link, inp.nodes)
        off_one = offload_seconds(inp, strategy, link, 1)
        step = _step(inp, strategy, link, comm, compute_s, off)
        step_one = _step(one, strategy, link, comm_one, compute_s, off_one)
        efficiency = None if step is None or step_one is None else step_one / step
        results.append(StrategyResult(
            strategy=strategy, memory=mem, memory_one_node=mem_one, fits=fits,
            fits_one_node=fits_one,
            shortfall=0.0 if usable_bytes is None else max(0.0, mem.total - usable_bytes),
            inter_node_bytes=moved, comm_s=comm, comm_one_node_s=comm_one, step_s=step,
            step_one_node_s=step_one, efficiency=efficiency, offload_s=off,
            offload_one_node_s=off_one, host_bytes=host, host_bytes_one_node=host_one,
            host_fits=host_fits, host_fits_one_node=host_fits_one))
    return tuple(results)


def _speed(r: StrategyResult, one_node: bool) -> float:
    step = r.step_one_node_s if one_node else r.step_s
    comm = r.comm_one_node_s if one_node else r.comm_s
    offload = r.offload_one_node_s if one_node else r.offload_s
    return step if step is not None else comm + offload


# Strategies that need DeepSpeed: on equal speed, torch's own (nothing more to install) goes first.
DEEPSPEED: frozenset[Strategy] = frozenset({"zero1", "zero2", "zero2+offload", "zero3"})


def tier(r: StrategyResult) -> int:
    """0: trains the whole model (offload's cost is in its step time); 1: adapters only."""
    return 1 if r.adapters_only else 0


def fastest(results: tuple[StrategyResult, ...], *, one_node: bool) -> StrategyResult | None:
    """The fastest strategy that fits, from the first tier (:func:`tier`) where any fits."""
    for level in (0, 1):
        pool = [r for r in results if tier(r) == level]
        fitting = [r for r in pool if (r.fits_one_node if one_node else r.fits)]
        if fitting:
            return min(fitting, key=lambda r: (_speed(r, one_node), r.strategy in DEEPSPEED,
                                               r.memory.total))
    return None
