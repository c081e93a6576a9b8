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
Strategy = Literal["ddp", "zero1", "zero2", "zero2+offload", "zero3", "fsdp", "fsdp+offload",
                   "hsdp", "lora", "qlora"]
STRATEGIES: tuple[Strategy, ...] = ("ddp", "zero1", "zero2", "zero2+offload", "zero3", "fsdp",
                                    "fsdp+offload", "hsdp", "lora", "qlora")
# Strategies that train only adapters: a different model at the end, recommended only as a fallback.
ADAPTER_STRATEGIES: frozenset[Strategy] = frozenset({"lora", "qlora"})
OFFLOAD_STRATEGIES: frozenset[Strategy] = frozenset({"zero2+offload", "fsdp+offload"})

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
    vocab: int = 0  # token embedding rows (0: no embedding, e.g. an MLP)
    tied_embeddings: bool = False  # one matrix for the input embedding and the output head

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Memory:
    """Bytes on each GPU (and in host memory per GPU, for offload) under one strategy.

    ``weights + gradients + optimizer`` are the model states as the ZeRO paper counts them;
    ``buffers`` is what the implementation keeps beside them (DDP buckets, DeepSpeed's fp32
    gradient partition, the FSDP/ZeRO-3 working set of gathered parameters).
    """

    strategy: Strategy
    shard_group: int  # ranks one copy of the sharded state is spread over (1: not sharded)
    weights: float
    gradients: float
    optimizer: float  # optimizer state including any fp32 master copy
    buffers: float
    activations: float | None  # None: micro-batch / sequence length not given
    host: float  # bytes per GPU held in CPU memory (offload)
    trainable: int  # parameters the optimizer updates

    @property
    def states(self) -> float:
        """The ZeRO paper's model states: weights, gradients, optimizer state."""
        return self.weights + self.gradients + self.optimizer

    @property
    def model_states(self) -> float:
        return self.states + self.buffers

    @property
    def total(self) -> float:
        return self.model_states + (self.activations or 0.0)


def _mixed(inp: MemoryInput) -> bool:
    return inp.grad_bytes < 4


def embedding_params(inp: MemoryInput) -> int:
    """Parameters of the token embedding and the output head (one matrix when tied)."""
    matrices = 1 if inp.tied_embeddings else 2
    return min(inp.params // 2, matrices * inp.vocab * inp.hidden)


def unit_params(inp: MemoryInput) -> float:
    """One FSDP unit: one transformer block (the embeddings are the root unit)."""
    return (inp.params - embedding_params(inp)) / max(1, inp.layers)


def largest_layer_params(inp: MemoryInput) -> float:
    """DeepSpeed's "largest layer": the biggest module's own parameters, here the embedding or
    the widest linear of a block (its 4h MLP matrix), whichever is larger."""
    return float(min(inp.params, max(inp.vocab * inp.hidden, 4 * inp.hidden**2)))


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


def fsdp_working_set(inp: MemoryInput) -> float:
    """torch FSDP2's unsharded bytes per GPU: the root unit (embeddings, kept gathered between
    forward and backward) + this block's and the prefetched next block's parameters + one block's
    unsharded gradients before the reduce-scatter. Counted on one GPU too: FSDP still casts and
    gathers each unit there."""
    w = g = float(inp.grad_bytes)  # param_dtype / reduce_dtype = the compute dtype
    return embedding_params(inp) * w + unit_params(inp) * (2 * w + g)


def deepspeed_working_set(inp: MemoryInput) -> float:
    """DeepSpeed ZeRO-3's estimator: the largest layer's parameters and gradients, gathered
    (4 bytes per parameter in 16-bit)."""
    return largest_layer_params(inp) * 2 * inp.grad_bytes


def memory(inp: MemoryInput, strategy: Strategy) -> Memory:
    """Per-GPU bytes for ``strategy`` on ``inp.nodes`` x ``inp.gpus_per_node`` GPUs."""
    p, g = float(inp.params), float(inp.grad_bytes)
    w = g  # weights are kept in the compute dtype (ZeRO's accounting)
    k = float(OPTIMIZER_STATE_BYTES[inp.optimizer] + (MASTER_BYTES if _mixed(inp) else 0))
    acts = activation_bytes(inp)
    n = inp.world
    # DeepSpeed steps an fp32 copy of each rank's gradient partition (mixed precision only).
    fp32_grads = 4.0 * p / n if _mixed(inp) else 0.0
    if strategy == "ddp":  # one more gradient-sized bucket copy, but only with peers to reduce
        return Memory(strategy, 1, p * w, p * g, p * k, p * g if n > 1 else 0.0, acts, 0.0,
                      inp.params)
    if strategy == "zero1":
        return Memory(strategy, n, p * w, p * g, p * k / n, fp32_grads, acts, 0.0, inp.params)
    if strategy in ("zero2", "zero2+offload"):
        # DeepSpeed's estimator holds the 16-bit gradients whole until they are reduced.
        held = p * g * (1 - 1 / n)
        state = p * k / n
        if strategy == "zero2+offload":  # ZeRO-Offload streams each reduced bucket to the CPU:
            # DeepSpeed's estimator counts the 16-bit weights alone on the GPU (2 P).
            return Memory(strategy, n, p * w, p * g / n, 0.0, 0.0, acts, state + fp32_grads,
                          inp.params)
        return Memory(strategy, n, p * w, p * g / n, state, held + fp32_grads, acts, 0.0,
                      inp.params)
    if strategy == "zero3":
        # DeepSpeed keeps the fp32 gradient partition in place of the 16-bit one (its 18 bytes).
        extra = max(0.0, fp32_grads - p * g / n)
        return Memory(strategy, n, p * w / n, p * g / n, p * k / n,
                      extra + deepspeed_working_set(inp), acts, 0.0, inp.params)
    if strategy in ("fsdp", "fsdp+offload", "hsdp"):
        shard = inp.gpus_per_node if strategy == "hsdp" else n
        # FSDP2: sharded params and grads in fp32 (the original dtype), the optimizer steps them.
        opt = float(OPTIMIZER_STATE_BYTES[inp.optimizer])
        working = fsdp_working_set(inp)
        if strategy == "fsdp+offload":
            return Memory(strategy, shard, 0.0, 0.0, 0.0, working, acts, p * (8 + opt) / shard,
                          inp.params)
        return Memory(strategy, shard, p * 4 / shard, p * 4 / shard, p * opt / shard, working,
                      acts, 0.0, inp.params)
    return _adapters(inp, strategy, acts)


def _adapters(inp: MemoryInput, strategy: Strategy, acts: float | None) -> Memory:
    """LoRA / QLoRA: the frozen base replicated, DDP over the adapters.

    LoRA (peft's default): adapters in fp32, 4 + 4 + optimizer state. QLoRA (Dettmers et al.):
    NF4 base, embeddings and head kept in 16-bit, adapters in bf16 (2 + 2) with a 32-bit paged
    optimizer (8 for Adam). A DDP bucket for the adapters' gradients only with peers to reduce.
    """
    a = float(lora_params(inp))
    opt = float(OPTIMIZER_STATE_BYTES[inp.optimizer])
    element = 2.0 if strategy == "qlora" else 4.0
    if strategy == "qlora":
        embed = float(embedding_params(inp))
        base = (inp.params - embed) * QLORA_BYTES_PER_PARAM + embed * 2
    else:
        base = inp.params * 2.0
    bucket = a * element if inp.world > 1 else 0.0
    return Memory(strategy, 1, base + a * element, a * element, a * opt, bucket, acts, 0.0,
                  int(a))


def all_memory(inp: MemoryInput) -> tuple[Memory, ...]:
    return tuple(memory(inp, s) for s in STRATEGIES)
