"""`ddpkit plan` as data: resolve inputs (flags > bench file > defaults), run the model, decide.

Pure: the CLI reads the bench file and parses units, this module never does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ddpkit.bench.planning.bench_results import (
    BenchFacts,
    costed_backend,
    failed_checks,
    with_bench_figures,
)
from ddpkit.bench.planning.fit import Decision, FitPlan, fit_plan
from ddpkit.bench.planning.gpus import Gpu, find_gpu
from ddpkit.bench.planning.memory import (
    STRATEGIES,
    MemoryInput,
    Optimizer,
    Strategy,
    embedding_params,
)
from ddpkit.bench.planning.model import (
    ALGORITHMS,
    GRAD_DTYPE_BYTES,
    OneNode,
    PlanInput,
    Setting,
    SettingResult,
    compute_from_one_node_step,
    default_hidden,
    evaluate,
    parse_setting,
)
from ddpkit.bench.planning.shapes import find_shape
from ddpkit.bench.planning.strategies import CPU_OPTIMIZER_PARAMS_PER_S, PCIE_BYTES_PER_S, Link
from ddpkit.bench.units import format_bytes, format_count, format_rate, format_seconds
from ddpkit.errors import UsageError
from ddpkit.i18n import _

DEFAULT_SETTINGS = "none,bf16,fp16,powersgd:1,powersgd:4,accumulate:2,accumulate:4,bf16+accumulate:4"
DEFAULT_INTRA_NODE = 20e9  # bytes/s: PCIe-class busbw without NVLink
DEFAULT_OVERLAP = 0.7
CPU_OVERLAP = 0.0
DEFAULT_VOCAB = 32000  # Llama's; pass --vocab (0: no token embedding)


@dataclass(frozen=True)
class PlanRequest:
    """What the user asked for; ``None`` means "not given" (a bench file or a default fills it)."""

    params: int | None = None
    model_bytes: int | None = None
    grad_dtype: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    inter_node: float | None = None  # bytes/s
    intra_node: float | None = None  # bytes/s
    step_compute: float | None = None  # seconds
    overlap: float | None = None
    hidden: int | None = None
    algorithm: str = "hierarchical"
    efficiency_threshold: float = 0.7
    settings: tuple[Setting, ...] = ()
    # Memory (docs/plan.md, "Memory model"): the GPU by name or its memory per GPU in bytes.
    gpu: str | None = None
    gpu_memory: int | None = None
    optimizer: Optimizer = "adamw"
    micro_batch: int | None = None
    seq_len: int | None = None
    layers: int | None = None
    checkpointing: bool = False
    lora_rank: int = 16
    model: str | None = None  # a known shape (shapes.py): params, layers, hidden, vocab
    precision: str | None = None  # fp32 | bf16 | fp16 (mixed precision): sets grad_dtype
    strategies: tuple[Strategy, ...] = STRATEGIES  # the memory-first rows to compare
    vocab: int | None = None
    tied_embeddings: bool = False
    host_memory: int | None = None  # bytes of RAM per node
    pcie: float | None = None  # bytes/s per GPU, host <-> GPU
    cpu_optimizer: float | None = None  # params/s per node


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    setting: str | None
    text: str
    cost: str | None = None
    strategy: str | None = None  # the training strategy (ddp, fsdp, hsdp ...) the verdict names
    apply: tuple[str, ...] = ()  # the lines of code or config that apply it


@dataclass(frozen=True)
class Plan:
    inputs: PlanInput
    sources: tuple[tuple[str, str], ...]
    assumptions: tuple[str, ...]
    one_node: OneNode
    results: tuple[SettingResult, ...]
    verdict: Verdict
    fit: FitPlan


def _pick(name: str, flag: Any, bench: Any, default: Any, sources: dict[str, str]) -> Any:
    if flag is not None:
        sources[name] = "flag"
        return flag
    if bench is not None:
        sources[name] = "bench"
        return bench
    sources[name] = "default"
    return default


def with_shape(req: PlanRequest) -> PlanRequest:
    """``req`` with ``--model``'s shape filling what the flags did not give."""
    if req.model is None:
        return req
    shape = find_shape(req.model)
    return replace(req, params=req.params if req.params is not None or req.model_bytes else
                   shape.params, layers=req.layers or shape.layers,
                   hidden=req.hidden or shape.hidden,
                   vocab=shape.vocab if req.vocab is None else req.vocab,
                   tied_embeddings=req.tied_embeddings or shape.tied_embeddings)


def resolve(req: PlanRequest, bench: BenchFacts | None = None) -> tuple[PlanInput, dict[str, str],
                                                                          list[str]]:
    """Fill a :class:`PlanInput` and say where each number came from and what was assumed."""
    req = with_shape(req)
    b = bench or BenchFacts(source="")
    sources: dict[str, str] = {}
    notes: list[str] = []
    if req.precision is not None and req.grad_dtype not in (None, req.precision):
        raise UsageError("bad-usage", _("--precision {precision} and --grad-dtype {dtype} "
                                        "disagree", precision=req.precision, dtype=req.grad_dtype),
                         _("give one of them"))
    grad_dtype = _pick("grad_dtype", req.precision or req.grad_dtype, b.grad_dtype, "fp32",
                       sources)
    grad_bytes = GRAD_DTYPE_BYTES[grad_dtype]
    if req.params is None and req.model_bytes is not None:
        params, sources["params"] = max(1, round(req.model_bytes / grad_bytes)), "flag"
        notes.append(_("--model-bytes is the gradient payload: {size} of {dtype} gradients = "
                       "{params} parameters", size=format_bytes(req.model_bytes),
                       dtype=grad_dtype, params=format_count(params)))
    else:
        params = _pick("params", req.params, b.params, None, sources)
    if params is None:
        raise UsageError("missing-model-size", _("plan needs the model size"),
                         _("pass --params 7B, --model llama-7b or --model-bytes 14GB (or --from-bench FILE)"))
    nodes = _pick("nodes", req.nodes, b.nodes if b.nodes and b.nodes > 1 else None, 2, sources)
    if nodes < 2:
        raise UsageError("bad-nodes", _("--nodes {nodes}: plan compares 1 node with N >= 2 nodes",
                                        nodes=nodes),
                         _("pass --nodes 2 or more"))
    gpus = _pick("gpus_per_node", req.gpus_per_node, b.gpus_per_node, 1, sources)
    inter = _pick("inter_node", req.inter_node, b.inter_node_busbw, None, sources)
    if inter is None:
        raise UsageError("missing-inter-node", _("plan needs the inter-node network rate"),
                         _("pass --inter-node 25Gbit (or --from-bench FILE with a measured busbw)"))
    if sources["inter_node"] == "bench":
        notes.append(_("inter-node rate is the measured all_reduce busbw {rate}",
                       rate=format_rate(inter)))
    gpu = find_gpu(req.gpu) if req.gpu is not None else None
    intra = _pick("intra_node", req.intra_node, None if gpu is None else gpu.intra_busbw,
                  DEFAULT_INTRA_NODE, sources)
    if gpu is not None and sources["intra_node"] == "bench":
        sources["intra_node"] = "gpu"
        if gpus > 1:
            notes.append(_("intra-node busbw {rate}: typical for {gpu} ({link}); pass --intra-node "
                           "to change", rate=format_rate(intra), gpu=gpu.title, link=gpu.link))
    if gpus > 1 and sources["intra_node"] == "default":
        notes.append(_("intra-node busbw assumed {rate} (PCIe, no NVLink); "
                       "pass --intra-node 300GB/s for NVLink", rate=format_rate(intra)))
    cpu_bench = (b.device or "").lower() == "cpu"
    overlap = _pick("overlap", req.overlap, CPU_OVERLAP if cpu_bench else None, DEFAULT_OVERLAP,
                    sources)
    if cpu_bench and sources["overlap"] == "bench":
        notes.append(_("overlap 0: the bench ran on CPU, where compute and Gloo share the cores "
                       "(calibrated on the sim, docs/plan.md)"))
    if not 0.0 <= overlap <= 1.0:
        raise UsageError("bad-overlap", _("--overlap {overlap} is outside 0..1", overlap=overlap),
                         _("give the fraction of communication DDP can hide, e.g. 0.7"))
    if not 0.0 < req.efficiency_threshold < 1.0:
        raise UsageError("bad-threshold", _("efficiency threshold {threshold} is outside (0, 1)",
                                            threshold=req.efficiency_threshold),
                         _("pass --efficiency-threshold 0.7"))
    if req.algorithm not in ALGORITHMS:
        raise UsageError("bad-algorithm", _("unknown algorithm {name!r}", name=req.algorithm),
                         _("choose one of {choices}", choices=", ".join(ALGORITHMS)))
    hidden = _pick("hidden", req.hidden, None, default_hidden(params), sources)
    if sources["hidden"] == "default":
        notes.append(_("PowerSGD sizes assume square {hidden}x{hidden} layers (transformer-like "
                       "width for this parameter count); pass --hidden to change", hidden=hidden))
    measured = (parse_setting(label) for label, count, _eff, _check in b.measured if count == nodes)
    # plain DDP first, then the asked-for ones and those the bench measured; no repeats
    settings = tuple(dict.fromkeys((Setting(), *req.settings, *measured)))
    inp = PlanInput(
        params=params, grad_dtype=grad_dtype, nodes=nodes, gpus_per_node=gpus,
        inter_node_bytes_per_s=inter, intra_node_bytes_per_s=intra, step_compute_s=None,
        overlap=overlap, hidden=hidden, algorithm=req.algorithm,
        efficiency_threshold=req.efficiency_threshold, settings=settings,
    )
    compute = req.step_compute
    sources["step_compute"] = "flag"
    if compute is None and b.one_node_step_s is not None:
        compute = compute_from_one_node_step(inp, b.one_node_step_s)
        sources["step_compute"] = "bench"
        notes.append(_("compute per step from the measured 1-node step {step}",
                       step=format_seconds(b.one_node_step_s)))
    elif compute is None:
        sources["step_compute"] = "unknown"
    inp = replace(inp, step_compute_s=compute, **_measured(inp, b, notes))
    return inp, sources, notes


def _measured(inp: PlanInput, b: BenchFacts, notes: list[str]) -> dict[str, Any]:
    same_model = (b.params in (None, inp.params) and b.grad_dtype in (None, inp.grad_dtype)
                  and b.gpus_per_node in (None, inp.gpus_per_node))
    if not same_model:
        if b.scaling or b.hook_step_s:
            notes.append(_("measured steps in the bench file are for another model or node size: "
                           "not used"))
        return {}
    overhead: tuple[tuple[str, float], ...] = ()
    if b.one_node_step_s is not None:
        base = b.one_node_step_s
        overhead = tuple((label, max(0.0, step - base)) for label, step in b.hook_step_s)
    measured = tuple((label, step) for label, nodes, step in b.scaling if nodes == inp.nodes)
    return {"hook_overhead_s": overhead, "measured_step_s": measured}


_COSTS = {
    "none": _("none: this is plain DDP"),
    "bf16": _("gradients are summed in bf16 (7-bit mantissa); compare the loss curve with an "
              "fp32-gradient run"),
    "fp16": _("gradients are summed in fp16 (narrow range; torch divides by world size first); "
              "compare the loss curve with an fp32-gradient run"),
    "powersgd": _("PowerSGD changes the optimisation (low-rank gradients with error feedback): "
                  "validate convergence by comparing loss/accuracy with plain DDP over the same "
                  "steps, keep its warm-up (start_powerSGD_iter, ~10% of training), and on Gloo "
                  "build DDP with a single bucket"),
}


def cost_of(setting: Setting) -> str:
    """What adopting ``setting`` costs in training behaviour, and how to apply it."""
    hook = None if setting.compression == "none" else _(
        "{cost}; apply with {call}", cost=_COSTS[setting.compression],
        call="ddpkit.ddp.apply_comm_hook(model, " + repr(setting.hook_spec) + ")")
    batch = None if setting.accumulate <= 1 else _(
        "the global batch grows {times}x (retune the learning rate or cut the per-GPU batch); "
        "run {skipped} of every {times} micro-steps inside `with model.no_sync():`",
        times=setting.accumulate, skipped=setting.accumulate - 1)
    if hook is not None and batch is not None:
        return _("{hook}; {batch}", hook=hook, batch=batch)
    return hook or batch or _COSTS["none"]


def compute_needed(seconds: float) -> str:
    """``>= 4.12 s``, or ``any`` when every compute time reaches the threshold."""
    return _("any") if seconds <= 0 else f">= {format_seconds(seconds)}"


def decide(inp: PlanInput, results: tuple[SettingResult, ...]) -> Verdict:
    """"go multi-node" / "stay on one node" / "undecided", with the numbers behind it."""
    n, threshold = inp.nodes, inp.efficiency_threshold
    usable = [r for r in results if not r.failed_in_bench]
    base = results[0]
    pct = f"{threshold:.0%}"
    if all(r.best_efficiency is None for r in usable):
        needs = "; ".join(f"{r.setting.label} {compute_needed(r.break_even_compute_s)}"
                          for r in usable)
        return Verdict("undecided", None,
                       _("undecided: no compute time per step given. For {pct} efficiency on "
                         "{n} nodes a step must compute for at least: {needs}. "
                         "Pass --step-compute or --from-bench.", pct=pct, n=n, needs=needs))
    rated = [r for r in usable if r.best_efficiency is not None]
    passing = sorted((r for r in rated if (r.best_efficiency or 0) >= threshold),
                     key=lambda r: (r.setting.invasiveness, -(r.best_efficiency or 0)))
    plain = f"{base.best_efficiency:.0%}" if base.best_efficiency is not None else "n/a"
    if passing:
        pick = passing[0]
        eff = pick.best_efficiency or 0.0
        how = _("measured") if pick.best_efficiency == pick.measured_efficiency else _("predicted")
        if pick.setting == Setting():
            text = _("go multi-node: plain DDP keeps {eff:.0%} efficiency ({how}) on {n} nodes, "
                     "{speed:.2f}x the throughput of one node (threshold {pct})",
                     eff=eff, how=how, n=n, speed=eff * n, pct=pct)
        else:
            text = _("go multi-node with {label}: {eff:.0%} efficiency ({how}) on {n} nodes, "
                     "{speed:.2f}x the throughput of one node (plain DDP: {plain}, "
                     "threshold {pct})", label=pick.setting.label, eff=eff, how=how, n=n,
                     speed=eff * n, plain=plain, pct=pct)
        if eff > 1.0:
            text = _("{verdict}; above 100% because the reference is plain DDP on one node and "
                     "{label} would shorten that node's own step too: try it on one node first",
                     verdict=text, label=pick.setting.label)
        return Verdict("go-multi-node", pick.setting.label, text, cost_of(pick.setting))
    best = max(rated, key=lambda r: r.best_efficiency or 0.0)
    eff = best.best_efficiency or 0.0
    speed = eff * n
    tail = (_("{n} nodes would be slower than one ({speed:.2f}x its throughput)", n=n,
              speed=speed) if speed <= 1.0
            else _("{n} nodes would give {speed:.2f}x the throughput for {n}x the GPUs", n=n,
                   speed=speed))
    return Verdict("stay-on-one-node", best.setting.label,
                   _("stay on one node: the best setting ({label}) reaches {eff:.0%} "
                     "efficiency on {n} nodes, under the {pct} threshold (plain DDP: {plain}); "
                     "{tail}", label=best.setting.label, eff=eff, n=n, pct=pct, plain=plain,
                     tail=tail))


def make_plan(req: PlanRequest, bench: BenchFacts | None = None) -> Plan:
    req = with_shape(req)
    inp, sources, notes = resolve(req, bench)
    notes.append(_("all-reduce model: {algorithm}, bandwidth only (no latency term)",
                   algorithm=inp.algorithm))
    notes.append(_("overlap {overlap:g}: exposed = comm - overlap x min(comm, compute)",
                   overlap=inp.overlap))
    if not inp.hook_overhead_s:
        notes.append(_("cast and PowerSGD compute costs are not modelled (no bench measured "
                       "them)"))
    one, results = evaluate(inp)
    results = with_bench_figures(results, bench, inp.nodes)
    fit = _fit(req, inp, bench)
    verdict = decide(inp, results)
    checked = failed_checks(results, bench)  # the bench's own figures that failed its check
    if checked is not None:
        withhold, said = checked
        verdict = (Verdict("undecided", None, said) if withhold else
                   replace(verdict, text=_("{verdict}; {more}", verdict=verdict.text, more=said)))
    if fit.verdict is not None:  # plain DDP does not fit: memory decides
        verdict = Verdict(fit.verdict.decision, None, fit.verdict.text, None,
                          fit.verdict.strategy, fit.verdict.apply)
    elif fit.usable_bytes is not None:
        verdict = replace(verdict, strategy="ddp")
    return Plan(inp, tuple(sorted(sources.items())), tuple(notes), one, results, verdict, fit)


def _fit(req: PlanRequest, inp: PlanInput, bench: BenchFacts | None = None) -> FitPlan:
    if req.vocab is not None and req.vocab < 0:
        raise UsageError("bad-memory-input", _("--vocab {value} must be at least 0",
                                               value=req.vocab), _("fix {flag}", flag="--vocab"))
    for name in ("micro_batch", "seq_len", "layers", "lora_rank", "gpu_memory", "host_memory"):
        value = getattr(req, name)
        if value is not None and value < 1:
            flag = f"--{name.replace('_', '-')}"
            raise UsageError("bad-memory-input", _("{flag} {value} must be at least 1", flag=flag,
                                                   value=value), _("fix {flag}", flag=flag))
    gpu: Gpu | None = find_gpu(req.gpu) if req.gpu is not None else None
    memory_bytes = req.gpu_memory if req.gpu_memory is not None else (
        None if gpu is None else gpu.memory_bytes)
    for name in ("pcie", "cpu_optimizer"):
        value = getattr(req, name)
        if value is not None and value <= 0:
            flag = "--cpu-optimizer-rate" if name == "cpu_optimizer" else "--pcie"
            raise UsageError("bad-memory-input", _("{flag} must be positive", flag=flag),
                             _("fix {flag}", flag=flag))
    vocab = DEFAULT_VOCAB if req.vocab is None else req.vocab
    mem = MemoryInput(
        params=inp.params, nodes=inp.nodes, gpus_per_node=inp.gpus_per_node,
        grad_bytes=inp.grad_bytes, optimizer=req.optimizer, layers=1, hidden=inp.hidden,
        micro_batch=req.micro_batch, seq_len=req.seq_len, checkpointing=req.checkpointing,
        lora_rank=req.lora_rank, vocab=vocab, tied_embeddings=req.tied_embeddings)
    blocks = (inp.params - embedding_params(mem)) / (12 * inp.hidden**2)
    mem = replace(mem, layers=req.layers or max(1, round(blocks)))
    host = req.host_memory if req.host_memory is not None else (
        None if gpu is None else gpu.host_per_gpu * inp.gpus_per_node)
    link = Link(inp.inter_node_bytes_per_s, inp.intra_node_bytes_per_s, inp.overlap,
                inp.algorithm, pcie=req.pcie or PCIE_BYTES_PER_S,
                cpu_optimizer=req.cpu_optimizer or CPU_OPTIMIZER_PARAMS_PER_S, host_memory=host,
                backend=costed_backend(bench, gpu_named=req.gpu is not None))
    return fit_plan(mem, link, inp.step_compute_s, gpu, memory_bytes, inp.efficiency_threshold,
                    req.strategies, host_default=req.host_memory is None)

