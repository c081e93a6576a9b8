"""Memory per GPU for each way of training data-parallel: pure arithmetic, no torch, no I/O.

Sources (docs/plan.md, "Memory model", derives every line):

* ZeRO (Rajbhandari et al., SC'20, section 3.1): mixed-precision Adam keeps 2 bytes of 16-bit
  weights, 2 of 16-bit gradients and K = 12 of optimizer state (fp32 master weights, momentum,
  variance) per parameter: 16 bytes. ZeRO-1 shards the K bytes over the N_d data-parallel ranks,
  ZeRO-2 also the gradients, ZeRO-3 also the weights: ``(2 + 2 + K/N)``, ``2 + (2 + K)/N``,
  ``(2 + 2 + K)/N`` bytes per parameter. In fp32 there is no master copy: 4 + 4 + 8.
* torch FSDP2 (``fully_shard``): the sharded parameters stay in their original dtype and are what
  the optimizer steps ("does not require any extra memory to keep a high-precision copy"); the
  reduce-scattered gradient is cast back to that dtype. With fp32 parameters that is
  ``(4 + 4 + 8)/N`` for Adam, plus the unsharded parameters (``param_dtype``) and gradients of the
  units being computed. HSDP is the same with N = the shard group (the GPUs of one node).
* torch DDP keeps its gradient buckets beside ``.grad`` unless ``gradient_as_bucket_view=True``:
  one more gradient-sized buffer (its docs: the saved memory "equals the total gradients size").
* LoRA (Hu et al. 2021) trains ``r (d_in + d_out)`` parameters per adapted matrix; QLoRA
  (Dettmers et al. 2023) stores the frozen base in 4-bit NF4 with double quantization: 4 bits plus
  0.127 bits of constants per parameter.
* Activations: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
  Models"), ``s b h (34 + 5 a s / h)`` bytes per transformer layer in 16-bit with dropout; with a
  fused (flash / SDPA) attention the ``a s^2`` term is not stored. Full activation checkpointing
  keeps each layer's 16-bit input (``2 s b h``) plus one layer's activations while recomputing.
  An estimate: its error on models measured here is in docs/plan.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Optimizer = Literal["adam", "adamw", "sgd"]
OPTIMIZERS: tuple[Optimizer, ...] = ("adam", "adamw", "sgd")
Strategy = Literal["ddp", "zero1", "zero2", "zero2+offload", "fsdp", "fsdp+offload", "hsdp",
                   "lora", "qlora"]
STRATEGIES: tuple[Strategy, ...] = ("ddp", "zero1", "zero2", "zero2+offload", "fsdp",
                                    "fsdp+offload", "hsdp", "lora", "qlora")
# Strategies that train only adapters: a different model at the end, recommended only as a fallback.
ADAPTER_STRATEGIES: frozenset[Strategy] = frozenset({"lora", "qlora"})

# fp32 optimizer state bytes per trained parameter (torch.optim keeps state in the param's dtype;
# mixed precision steps an fp32 master). SGD means SGD with momentum (one buffer).
OPTIMIZER_STATE_BYTES: dict[Optimizer, int] = {"adam": 8, "adamw": 8, "sgd": 4}
MASTER_BYTES = 4  # fp32 master copy when the model computes in 16-bit (ZeRO's mixed precision)
QLORA_BYTES_PER_PARAM = (4 + 0.127) / 8  # NF4 + double-quantized constants (QLoRA paper)
LORA_MATRICES_PER_LAYER = 18  # r(d_in+d_out) summed: q,k,v,o (4 x 2h) + MLP h->4h->h (2 x 5h)


@dataclass(frozen=True)
class MemoryInput:
    """One model and one cluster layout. Bytes per element: 4 (fp32) or 2 (bf16/fp16)."""

    params: int
    nodes: int
    gpus_per_node: int
    grad_bytes: int = 4  # 2: mixed precision (16-bit weights and gradients), 4: fp32
    optimizer: Optimizer = "adamw"
    layers: int = 32  # transformer blocks (= FSDP units), for the working set and activations
    hidden: int = 4096
    micro_batch: int | None = None  # sequences per GPU per micro-step
    seq_len: int | None = None
    checkpointing: bool = False
    lora_rank: int = 16

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Memory:
    """Bytes on each GPU (and in host memory per GPU, for offload) under one strategy."""

    strategy: Strategy
    shard_group: int  # ranks one copy of the sharded state is spread over (1: not sharded)
    weights: float
    gradients: float
    optimizer: float  # optimizer state including any fp32 master copy
    buffers: float  # DDP buckets; FSDP's unsharded units being computed
    activations: float | None  # None: micro-batch / sequence length not given
    host: float  # bytes per GPU held in CPU memory (offload)
    trainable: int  # parameters the optimizer updates

    @property
    def model_states(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.buffers

    @property
    def total(self) -> float:
        return self.model_states + (self.activations or 0.0)


def _mixed(inp: MemoryInput) -> bool:
    return inp.grad_bytes < 4


def lora_params(inp: MemoryInput) -> int:
    """Trainable adapter parameters: rank r on every linear layer of every block."""
    return inp.lora_rank * LORA_MATRICES_PER_LAYER * inp.hidden * inp.layers


def activation_bytes(inp: MemoryInput) -> float | None:
    """Korthikanti et al.'s estimate with fused attention: 34 s b h per layer in 16-bit.

    Elements per layer (no dropout masks): 16 s b h; masks add 2 s b h bytes. fp32 compute stores
    4-byte elements: 16 x 4 + 2 = 66 s b h. Checkpointing: L layer inputs + one layer recomputed.
    """
    if inp.micro_batch is None or inp.seq_len is None:
        return None
    element = inp.grad_bytes  # activations are kept in the compute dtype
    sbh = float(inp.micro_batch * inp.seq_len * inp.hidden)
    per_layer = sbh * (16 * element + 2)
    if inp.checkpointing:
        return inp.layers * sbh * element + per_layer
    return inp.layers * per_layer


def memory(inp: MemoryInput, strategy: Strategy) -> Memory:
    """Per-GPU bytes for ``strategy`` on ``inp.nodes`` x ``inp.gpus_per_node`` GPUs."""
    p, g = float(inp.params), float(inp.grad_bytes)
    w = g  # weights are kept in the compute dtype (ZeRO's accounting)
    opt = OPTIMIZER_STATE_BYTES[inp.optimizer] + (MASTER_BYTES if _mixed(inp) else 0)
    acts = activation_bytes(inp)
    world = inp.world
    unit = p / max(1, inp.layers)  # one FSDP unit = one transformer block
    if strategy == "ddp":
        return Memory(strategy, 1, p * w, p * g, p * opt, p * g, acts, 0.0, inp.params)
    if strategy == "zero1":
        return Memory(strategy, world, p * w, p * g, p * opt / world, 0.0, acts, 0.0, inp.params)
    if strategy in ("zero2", "zero2+offload"):
        offload = strategy == "zero2+offload"
        state = p * opt / world
        return Memory(strategy, world, p * w, p * g / world, 0.0 if offload else state, 0.0,
                      acts, state if offload else 0.0, inp.params)
    if strategy in ("fsdp", "fsdp+offload", "hsdp"):
        shard = inp.gpus_per_node if strategy == "hsdp" else world
        # FSDP2: sharded params and grads in fp32 (the original dtype), the optimizer steps them.
        sharded = p * (4 + 4 + OPTIMIZER_STATE_BYTES[inp.optimizer]) / shard
        weights, grads, state = p * 4 / shard, p * 4 / shard, sharded - p * 8 / shard
        # Working set: this unit's and the prefetched next unit's parameters, one unit's grads.
        working = unit * (2 * w + g) if shard > 1 else 0.0
        if strategy == "fsdp+offload":
            return Memory(strategy, shard, 0.0, 0.0, 0.0, working, acts, sharded, inp.params)
        return Memory(strategy, shard, weights, grads, state, working, acts, 0.0, inp.params)
    # LoRA / QLoRA: frozen base replicated (DDP over the adapters), adapters trained in fp32.
    adapters = lora_params(inp)
    base = p * (QLORA_BYTES_PER_PARAM if strategy == "qlora" else 2.0)
    a = float(adapters)
    adapter_opt = a * OPTIMIZER_STATE_BYTES[inp.optimizer]
    return Memory(strategy, 1, base + a * 4, a * 4, adapter_opt, a * 4, acts, 0.0, adapters)


def all_memory(inp: MemoryInput) -> tuple[Memory, ...]:
    return tuple(memory(inp, s) for s in STRATEGIES)
