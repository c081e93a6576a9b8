"""`ddpkit plan`, memory first: does plain DDP fit, and if not, which strategy to run and how.

Pure. :func:`fit_plan` evaluates every strategy (:mod:`ddpkit.bench.planning.strategies`) and, when plain
DDP does not fit the GPU, returns the verdict that replaces the DDP-settings verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from ddpkit.bench.planning.gpus import RESERVE_BYTES, Gpu, usable_bytes
from ddpkit.bench.planning.memory import (
    OFFLOAD_STRATEGIES,
    STRATEGIES,
    Memory,
    MemoryInput,
    Strategy,
    activation_bytes,
)
from ddpkit.bench.planning.model import exposed_seconds
from ddpkit.bench.planning.strategies import (
    HOST_USABLE,
    Link,
    StrategyResult,
    evaluate_strategies,
    fastest,
)
from ddpkit.bench.units import format_bytes, format_count, format_rate, format_seconds
from ddpkit.i18n import _

# What plan answers: multi-node pays off, stay on one node, too close to call, or nothing fits.
Decision = Literal["go-multi-node", "stay-on-one-node", "undecided", "does-not-fit"]


@dataclass(frozen=True)
class FitVerdict:
    decision: Decision
    strategy: Strategy | None
    text: str
    apply: tuple[str, ...] = ()


@dataclass(frozen=True)
class FitPlan:
    inputs: MemoryInput
    gpu: Gpu | None
    memory_bytes: int | None  # per GPU; None: not given, fit not checked
    usable_bytes: int | None
    link: Link
    results: tuple[StrategyResult, ...]
    verdict: FitVerdict | None  # None: plain DDP fits (or fit unknown): the DDP verdict stands
    notes: tuple[str, ...]


_TORCH_DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}


def _torch_mesh(mesh: str, shard: str, dtype: str, offload: bool = False) -> tuple[str, ...]:
    half = _TORCH_DTYPES.get(dtype)
    policy = ("mp = MixedPrecisionPolicy()  # fp32 gradients: no mixed precision" if half is None
              else f"mp = MixedPrecisionPolicy(param_dtype={half}, reduce_dtype={half})")
    names = "CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard" if offload else (
        "MixedPrecisionPolicy, fully_shard")
    return (
        *(("import torch",) if half is not None else ()),
        "from torch.distributed.device_mesh import init_device_mesh",
        f"from torch.distributed.fsdp import {names}",
        f"mesh = {mesh}",
        policy,
        f"for block in model.layers:  # one unit per transformer block{shard}",
        "    fully_shard(block, mesh=mesh, mp_policy=mp)",
        "fully_shard(model, mesh=mesh, mp_policy=mp)",
    )


def apply_lines(strategy: Strategy, nodes: int, gpus: int, dtype: str = "bf16") -> tuple[str, ...]:
    """The few lines of torch, or the DeepSpeed / peft settings, that apply ``strategy``.

    ``dtype`` is the gradient dtype the plan assumed (fp32, bf16, fp16).
    """
    if strategy == "fsdp":
        return _torch_mesh(f'init_device_mesh("cuda", ({nodes * gpus},))', "", dtype)
    if strategy == "hsdp":
        return _torch_mesh(f'init_device_mesh("cuda", ({nodes}, {gpus}), '
                           'mesh_dim_names=("replicate", "shard"))', "; 2-D mesh = HSDP", dtype)
    if strategy == "fsdp+offload":
        return (*_torch_mesh(f'init_device_mesh("cuda", ({nodes * gpus},))', "", dtype, True)[:-2],
                "    fully_shard(block, mesh=mesh, mp_policy=mp, offload_policy=CPUOffloadPolicy())",
                "fully_shard(model, mesh=mesh, mp_policy=mp, offload_policy=CPUOffloadPolicy())")
    if strategy in ("zero1", "zero2", "zero2+offload", "zero3"):
        stage = strategy[4]
        offload = (', "offload_optimizer": {"device": "cpu"}' if strategy.endswith("offload")
                   else "")
        precision = {"bf16": "bf16", "fp16": "fp16"}.get(dtype)
        return ("DeepSpeed config (accelerate: deepspeed_config.zero_stage "
                f"= {stage}{', offload_optimizer_device = cpu' if offload else ''}):",
                "{" + (f'"{precision}": {{"enabled": true}},' if precision else ""),
                f' "zero_optimization": {{"stage": {stage}{offload}}}}}')
    if strategy in ("lora", "qlora"):
        lines = ("from peft import LoraConfig, get_peft_model",
                 "from torch.nn.parallel import DistributedDataParallel",
                 'model = get_peft_model(model, LoraConfig(r=16, target_modules="all-linear"))',
                 "ddp = DistributedDataParallel(model)  # only the adapters get gradients")
        if strategy == "qlora":
            return ("import torch",
                    "from transformers import AutoModelForCausalLM, BitsAndBytesConfig",
                    'quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",',
                    "    bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)",
                    "model = AutoModelForCausalLM.from_pretrained(name, quantization_config=quant)",
                    *lines, "# TrainingArguments(optim=\"paged_adamw_32bit\"): QLoRA's paged optimizer")
        return lines
    return ("from torch.nn.parallel import DistributedDataParallel",
            "ddp = DistributedDataParallel(model)")


def fit_plan(inp: MemoryInput, link: Link, compute_s: float | None, gpu: Gpu | None,
             memory_bytes: int | None, threshold: float,
             strategies: tuple[Strategy, ...] = STRATEGIES, host_default: bool = False) -> FitPlan:
    usable = None if memory_bytes is None else usable_bytes(memory_bytes)
    results = tuple(r for r in evaluate_strategies(inp, link, compute_s, usable)
                    if r.strategy in strategies)
    notes = [
        _("memory: ZeRO's accounting (16-bit weights and gradients + fp32 master and optimizer "
          "state); FSDP keeps fp32 shards; DDP adds its gradient buckets on more than one GPU")
        if inp.grad_bytes < 4 else
        _("memory: fp32 weights, gradients and optimizer state (no master copy); FSDP keeps "
          "fp32 shards; DDP adds its gradient buckets on more than one GPU"),
        _("working set: fsdp/hsdp as torch FSDP2 (embeddings + 2 gathered blocks + one block's "
          "gradients, {layers} blocks); zero3 as DeepSpeed's estimator (4 bytes x largest layer)",
          layers=inp.layers),
        _("fits = model state + activations <= GPU memory - {reserve} "
          "(CUDA context, NCCL buffers, fragmentation)", reserve=format_bytes(RESERVE_BYTES)),
    ]
    if any(r.strategy in OFFLOAD_STRATEGIES for r in results):
        host = (_("not checked (pass --host-memory)") if link.host_memory is None else
                _("{size} per node, {share:.0%} of it for offloaded state",
                  size=format_bytes(link.host_memory), share=HOST_USABLE))
        if host_default and gpu is not None:
            host = _("{host} (a typical {gpu} instance; --host-memory to change)", host=host,
                     gpu=gpu.title)
        notes.append(_("offload: PCIe {pcie} per GPU, CPU optimizer {rate} params/s per node "
                       "(--pcie, --cpu-optimizer-rate); host memory {host}",
                       pcie=format_rate(link.pcie), rate=format_count(int(link.cpu_optimizer)),
                       host=host))
    if inp.micro_batch is None or inp.seq_len is None:
        notes.append(_("activations not counted: pass --micro-batch and --seq-len (memory shown "
                       "is model state only, a lower bound)"))
    else:
        notes.append(_("activations: transformer estimate for {layers} layers x {hidden} wide, "
                       "fused attention, checkpointed", layers=inp.layers, hidden=inp.hidden)
                     if inp.checkpointing else
                     _("activations: transformer estimate for {layers} layers x {hidden} wide, "
                       "fused attention", layers=inp.layers, hidden=inp.hidden))
        if not inp.checkpointing:
            now = activation_bytes(inp) or 0.0
            then = activation_bytes(replace(inp, checkpointing=True)) or 0.0
            notes.append(_("--checkpointing would cut activations from {now} to {then} per GPU "
                           "(one more forward per step)", now=format_bytes(now),
                           then=format_bytes(then)))
    notes.append(_("sharded all-gathers/reduce-scatters cross nodes as rings over all ranks"))
    verdict = decide_fit(inp, results, usable, compute_s, threshold, link.overlap)
    return FitPlan(inp, gpu, memory_bytes, usable, link, results, verdict, tuple(notes))


def _mem(m: Memory) -> str:
    return format_bytes(m.total)


def decide_fit(inp: MemoryInput, results: tuple[StrategyResult, ...], usable: int | None,
               compute_s: float | None, threshold: float,
               overlap: float = 0.7) -> FitVerdict | None:
    """The memory-first verdict, or None when plain DDP fits (the DDP-settings verdict stands)."""
    ddp = next((r for r in results if r.strategy == "ddp"), None)
    if usable is None or not results or (ddp is not None and ddp.fits):
        return None
    head = (_("plain DDP does not fit: it needs {need} per GPU, {usable} usable",
              need=_mem(ddp.memory), usable=format_bytes(usable)) if ddp is not None else
            _("{usable} usable per GPU", usable=format_bytes(usable)))
    verdict = _decide(inp, results, usable, compute_s, threshold, head, overlap)
    hint = _adapter_hint(results, verdict)
    return verdict if hint is None else replace(
        verdict, text=_("{verdict}; {hint}", verdict=verdict.text, hint=hint))


def _adapter_hint(results: tuple[StrategyResult, ...], verdict: FitVerdict) -> str | None:
    """Name LoRA/QLoRA when full training needs CPU offload (or nothing) and adapters fit."""
    if verdict.strategy is not None and verdict.strategy not in OFFLOAD_STRATEGIES:
        return None
    one_node = verdict.decision != "go-multi-node"
    adapters = [r for r in results if r.adapters_only
                and (r.fits_one_node if one_node else r.fits)]
    if not adapters:
        return None
    pick = min(adapters, key=lambda r: (r.memory_one_node if one_node else r.memory).total)
    return _("full fine-tuning needs CPU offload here; {strategy} fits without it ({memory} "
             "per GPU): the usual way to fine-tune on such GPUs, it trains adapters only",
             strategy=pick.strategy,
             memory=_mem(pick.memory_one_node if one_node else pick.memory))


def _least_speedup(one: StrategyResult, multi: StrategyResult, n: int, overlap: float) -> float:
    """The smallest N-node over 1-node throughput over compute times from 0 to 10^4 s."""
    def step(compute: float, comm: float, offload: float) -> float:
        return compute + exposed_seconds(comm, compute, overlap) + offload

    grid = [0.0, *(10.0 ** (e / 4) for e in range(-16, 17))]
    return min(n * step(c, one.comm_one_node_s, one.offload_one_node_s)
               / max(1e-12, step(c, multi.comm_s, multi.offload_s)) for c in grid)


def _decide(inp: MemoryInput, results: tuple[StrategyResult, ...], usable: int,
            compute_s: float | None, threshold: float, head: str, overlap: float) -> FitVerdict:
    n, gpus = inp.nodes, inp.gpus_per_node
    best_n, best_1 = fastest(results, one_node=False), fastest(results, one_node=True)
    if best_n is None:
        closest = min(results, key=lambda r: r.memory.total)
        return FitVerdict("does-not-fit", None, _(
            "{head}; nothing fits on {n} nodes x {gpus} GPUs: the smallest, {strategy}, needs "
            "{need} per GPU ({short} short). Add nodes, turn on --checkpointing, cut "
            "--micro-batch, or rent GPUs with more memory", head=head, n=n, gpus=gpus,
            strategy=closest.strategy, need=_mem(closest.memory),
            short=format_bytes(closest.shortfall)))
    multi = _("{strategy} ({memory} per GPU, {traffic} across each node's link per step)",
              strategy=best_n.strategy, memory=_mem(best_n.memory),
              traffic=format_bytes(best_n.inter_node_bytes))
    dtype = {4: "fp32"}.get(inp.grad_bytes, "bf16")
    apply_n = apply_lines(best_n.strategy, n, gpus, dtype)
    if best_1 is None:
        text = _("{head}; nothing fits on one node. Run {multi} on {n} nodes", head=head,
                 multi=multi, n=n)
        if best_n.step_s is not None:
            text = _("{text}, step {step}", text=text, step=format_seconds(best_n.step_s))
        if best_n.adapters_only:
            text = _("{text} (trains adapters only)", text=text)
        return FitVerdict("go-multi-node", best_n.strategy, text, apply_n)
    fits_there = _("{strategy} fits there ({memory} per GPU)", strategy=best_1.strategy,
                   memory=_mem(best_1.memory_one_node))
    one = _("one node is enough: {fits}", fits=fits_there)
    apply_1 = apply_lines(best_1.strategy, 1, gpus, dtype)
    if compute_s is None or best_1.step_one_node_s is None or best_n.step_s is None:
        worst = _least_speedup(best_1, best_n, n, overlap)
        if worst / n >= threshold:  # whatever the compute per step: e.g. offload's fixed cost
            return FitVerdict("go-multi-node", best_n.strategy, _(
                "{head}; go multi-node with {multi}: at any compute per step, {n} nodes give at "
                "least {speedup:.2f}x the throughput of one node running {strategy} (threshold "
                "{threshold:.0%})", head=head, multi=multi, n=n, speedup=worst,
                strategy=best_1.strategy, threshold=threshold), apply_n)
        return FitVerdict("undecided", best_1.strategy, _(
            "{head}; {one}; on {n} nodes: {multi}. Pass --step-compute to say whether {n} "
            "nodes pay off", head=head, one=one, n=n, multi=multi),
            apply_1)
    speedup = n * best_1.step_one_node_s / best_n.step_s
    same = (_("{eff:.0%} efficiency against {strategy} on one node", eff=best_n.efficiency,
              strategy=best_n.strategy)
            if best_n.fits_one_node and best_n.efficiency is not None else
            _("{strategy} does not fit on one node", strategy=best_n.strategy))
    gain = _("{speedup:.2f}x the throughput of one node running {strategy}", speedup=speedup,
             strategy=best_1.strategy)
    if speedup > n:
        gain = _("{gain} (more than {n}x: {multi} needs {n} nodes' memory and is faster than "
                 "{one})", gain=gain, n=n, multi=best_n.strategy, one=best_1.strategy)
    if speedup / n >= threshold:
        return FitVerdict("go-multi-node", best_n.strategy, _(
            "{head}; go multi-node with {multi}: {same}, {gain} (threshold {threshold:.0%})",
            head=head, multi=multi, same=same, gain=gain, threshold=threshold), apply_n)
    return FitVerdict("stay-on-one-node", best_1.strategy, _(
        "{head}; stay on one node: {fits}, step {step}. The fastest on {n} nodes is {multi}: "
        "{same}, {gain}, under the {threshold:.0%} threshold", head=head, fits=fits_there,
        step=format_seconds(best_1.step_one_node_s), n=n, multi=multi, same=same, gain=gain,
        threshold=threshold), apply_1)


def _memory_dict(m: Memory) -> dict[str, Any]:
    return {"shard_group": m.shard_group, "weights": m.weights, "gradients": m.gradients,
            "optimizer": m.optimizer, "states": m.states, "buffers": m.buffers,
            "activations": m.activations, "host": m.host, "total": m.total,
            "trainable_params": m.trainable}


def fit_to_dict(fit: FitPlan) -> dict[str, Any]:
    inp = fit.inputs
    return {
        "gpu": None if fit.gpu is None else fit.gpu.name,
        "gpu_memory_bytes": fit.memory_bytes, "usable_bytes": fit.usable_bytes,
        "reserve_bytes": RESERVE_BYTES,
        "optimizer": inp.optimizer, "layers": inp.layers, "hidden": inp.hidden,
        "micro_batch": inp.micro_batch, "seq_len": inp.seq_len,
        "checkpointing": inp.checkpointing, "lora_rank": inp.lora_rank, "vocab": inp.vocab,
        "host_memory_bytes": fit.link.host_memory, "pcie_bytes_per_s": fit.link.pcie,
        "cpu_optimizer_params_per_s": fit.link.cpu_optimizer,
        "working_set": {"fsdp": "torch-fsdp2-unit", "hsdp": "torch-fsdp2-unit",
                        "zero3": "deepspeed-4x-largest-layer"},
        "notes": list(fit.notes),
        "strategies": [{
            "strategy": r.strategy, "adapters_only": r.adapters_only,
            "memory_per_gpu": _memory_dict(r.memory),
            "memory_per_gpu_one_node": _memory_dict(r.memory_one_node),
            "fits": r.fits, "fits_one_node": r.fits_one_node, "shortfall_bytes": r.shortfall,
            "inter_node_bytes_per_step": r.inter_node_bytes, "comm_s": r.comm_s,
            "comm_one_node_s": r.comm_one_node_s, "step_s": r.step_s,
            "step_one_node_s": r.step_one_node_s, "efficiency": r.efficiency,
            "offload_s": r.offload_s, "offload_one_node_s": r.offload_one_node_s,
            "host_bytes_per_node": r.host_bytes, "host_bytes_per_node_one_node":
                r.host_bytes_one_node, "host_fits": r.host_fits,
            "host_fits_one_node": r.host_fits_one_node,
        } for r in fit.results],
    }
