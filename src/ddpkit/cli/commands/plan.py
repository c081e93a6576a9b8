"""`ddpkit plan`: predict whether multi-node pays off for a model and a network. No torch import."""

from __future__ import annotations

import argparse

from ddpkit.bench.planning import gpus
from ddpkit.bench.planning.bench_results import BenchFacts, read_bench
from ddpkit.bench.planning.memory import OPTIMIZERS, STRATEGIES, Strategy
from ddpkit.bench.planning.model import ALGORITHMS, GRAD_DTYPE_BYTES, parse_setting
from ddpkit.bench.planning.plan import (
    DEFAULT_SETTINGS,
    Plan,
    PlanRequest,
    compute_needed,
    make_plan,
)
from ddpkit.bench.planning.plan_json import plan_to_dict
from ddpkit.bench.planning.shapes import SHAPES
from ddpkit.bench.units import (
    format_bytes,
    format_count,
    format_rate,
    format_seconds,
    parse_count,
    parse_duration,
    parse_rate,
    parse_size,
)
from ddpkit.cli.options import add_flag, add_json_flag
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.cli.output.plan_memory import memory_footer, show_memory
from ddpkit.errors import UsageError
from ddpkit.i18n import _, _n
from ddpkit.report import document

HELP = _("predict whether a model fits and whether multi-node pays off for it")


def configure(parser: argparse.ArgumentParser) -> None:
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--params", metavar="N", help=_("parameter count: 7B, 125M, 25e6 (SI)"))
    size.add_argument("--model-bytes", "--model_bytes", dest="model_bytes", metavar="SIZE",
             help=_("gradient bytes per all-reduce: 14GB (SI), 13GiB; params = bytes / grad dtype"))
    add_flag(parser, "--nodes", type=int, metavar="N", help=_("nodes to compare with one (default 2)"))
    add_flag(parser, "--gpus-per-node", type=int, metavar="G", help=_("GPUs per node (default 1)"))
    add_flag(parser, "--inter-node", metavar="RATE",
             help=_("network rate per node: 25Gbit, 10Gb/s (bits) or 3GB/s (bytes)"))
    add_flag(parser, "--intra-node", metavar="RATE",
             help=_("intra-node busbw per GPU, e.g. 300GB/s for NVLink (default 20GB/s, PCIe)"))
    add_flag(parser, "--step-compute", metavar="TIME",
             help=_("compute per step without communication: 0.8s, 291ms"))
    add_flag(parser, "--overlap", type=float, metavar="F",
             help=_("fraction of communication DDP can hide behind backward (default 0.7)"))
    add_flag(parser, "--grad-dtype", choices=sorted(GRAD_DTYPE_BYTES),
             help=_("gradient element type (default fp32)"))
    add_flag(parser, "--hidden", type=int, metavar="H",
             help=_("layer width for PowerSGD sizes (default: estimated from --params)"))
    add_flag(parser, "--algorithm", choices=ALGORITHMS, default="hierarchical",
             help=_("all-reduce model (default hierarchical; flat-ring = NCCL ring over all ranks)"))
    add_flag(parser, "--settings", default=DEFAULT_SETTINGS, metavar="LIST",
             help=_("comma list of settings to compare"))
    add_flag(parser, "--efficiency-threshold", type=float, default=0.7, metavar="F",
             help=_("efficiency that justifies going multi-node (default 0.7)"))
    add_flag(parser, "--from-bench", metavar="FILE",
             help=_("use measured numbers from a `ddpkit bench --json` file (ddpkit.bench/1)"))
    memory = parser.add_argument_group(_("memory (does it fit? docs/plan.md)"))
    add_flag(memory, "--gpu", metavar="NAME",
             help=_("GPU kind: {names} (memory and intra-node link)",
                    names=", ".join(gpus.names())))
    add_flag(memory, "--gpu-memory", metavar="SIZE", help=_("memory per GPU: 24GiB, 80GB"))
    add_flag(memory, "--optimizer", choices=OPTIMIZERS, default="adamw",
             help=_("optimizer (default adamw; sgd = with momentum)"))
    add_flag(memory, "--micro-batch", type=int, metavar="B", help=_("sequences per GPU per step"))
    add_flag(memory, "--seq-len", type=int, metavar="S", help=_("tokens per sequence"))
    add_flag(memory, "--layers", type=int, metavar="L",
             help=_("transformer blocks (default: from --params and --hidden)"))
    add_flag(memory, "--checkpointing", action="store_true",
             help=_("activation checkpointing on every block"))
    add_flag(memory, "--lora-rank", type=int, default=16, metavar="R",
             help=_("LoRA/QLoRA adapter rank (default 16, all linear layers)"))
    add_flag(memory, "--precision", choices=sorted(GRAD_DTYPE_BYTES),
             help=_("fp32, or bf16/fp16 mixed precision as ZeRO counts it (sets --grad-dtype)"))
    add_flag(memory, "--strategy", metavar="NAME[,NAME]",
             help=_("compare only these strategies: {names}", names=", ".join(STRATEGIES)))
    add_flag(memory, "--model", metavar="NAME",
             help=_("a known shape: {names} (sets --params, --layers, --hidden, --vocab)",
                    names=", ".join(s.name for s in SHAPES)))
    add_flag(memory, "--vocab", type=int, metavar="V",
             help=_("token embedding rows (default 32000; 0: none)"))
    add_flag(memory, "--tied-embeddings", action="store_true",
             help=_("the output head shares the embedding matrix"))
    add_flag(memory, "--host-memory", metavar="SIZE",
             help=_("RAM per node for CPU offload (default: a typical instance of --gpu)"))
    add_flag(memory, "--pcie", metavar="RATE",
             help=_("host-GPU copy rate per GPU for offload (default 12GB/s)"))
    add_flag(memory, "--cpu-optimizer-rate", metavar="N",
             help=_("parameters per second the CPU optimizer steps per node (default 1e9)"))
    add_flag(memory, "--plot", metavar="FILE.png",
             help=_("draw memory per GPU per strategy against the usable memory (needs the "
                    "'plot' extra: matplotlib)"))
    add_json_flag(parser)


def request_from_args(args: argparse.Namespace) -> PlanRequest:
    """Parse the flags' units into a :class:`PlanRequest` (None where a flag was not given)."""
    for name in ("nodes", "gpus_per_node", "hidden"):
        value = getattr(args, name)
        if value is not None and value < 1:
            flag = "--" + name.replace("_", "-")
            raise UsageError("bad-usage", _("{flag} {value} must be at least 1", flag=flag,
                                            value=value), _("fix {flag}", flag=flag))
    settings = tuple(parse_setting(s) for s in args.settings.split(",") if s.strip())
    return PlanRequest(
        params=None if args.params is None else parse_count(args.params, flag="--params"),
        model_bytes=None if args.model_bytes is None
        else parse_size(args.model_bytes, flag="--model-bytes"),
        grad_dtype=args.grad_dtype,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        inter_node=None if args.inter_node is None
        else parse_rate(args.inter_node, flag="--inter-node"),
        intra_node=None if args.intra_node is None
        else parse_rate(args.intra_node, flag="--intra-node"),
        step_compute=None if args.step_compute is None
        else parse_duration(args.step_compute, flag="--step-compute"),
        overlap=args.overlap,
        hidden=args.hidden,
        algorithm=args.algorithm,
        efficiency_threshold=args.efficiency_threshold,
        settings=settings,
        gpu=args.gpu,
        gpu_memory=None if args.gpu_memory is None
        else parse_size(args.gpu_memory, flag="--gpu-memory"),
        optimizer=args.optimizer,
        micro_batch=args.micro_batch,
        seq_len=args.seq_len,
        layers=args.layers,
        checkpointing=args.checkpointing,
        lora_rank=args.lora_rank,
        model=args.model,
        precision=args.precision,
        strategies=STRATEGIES if args.strategy is None else parse_strategies(args.strategy),
        vocab=args.vocab,
        tied_embeddings=args.tied_embeddings,
        host_memory=None if args.host_memory is None
        else parse_size(args.host_memory, flag="--host-memory"),
        pcie=None if args.pcie is None else parse_rate(args.pcie, flag="--pcie"),
        cpu_optimizer=None if args.cpu_optimizer_rate is None
        else float(parse_count(args.cpu_optimizer_rate, flag="--cpu-optimizer-rate")),
    )


def parse_strategies(text: str) -> tuple[Strategy, ...]:
    """``fsdp,hsdp`` -> the strategies, in the order given, each once."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown or not names:
        raise UsageError("bad-strategy", _("unknown strategy {name!r} in --strategy",
                                           name=(unknown or [text])[0]),
                         _("choose from {names}", names=",".join(STRATEGIES)))
    return tuple(dict.fromkeys(s for s in STRATEGIES if s in names))


def run(args: argparse.Namespace, console: Console) -> int:
    request = request_from_args(args)
    if args.plot:
        from ddpkit.bench.plot import require_matplotlib

        require_matplotlib()  # before any work: a clear error, not a traceback at the end
    bench: BenchFacts | None = read_bench(args.from_bench) if args.from_bench else None
    plan = make_plan(request, bench)
    if args.plot:
        from ddpkit.bench.plan_plot import write_plan_plot

        write_plan_plot(plan.fit, args.plot)
    if args.json:
        render.emit_json(console, document("plan", 2, plan_to_dict(plan)))
    else:
        show(console, plan)
    return 0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _secs(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)


def show(console: Console, plan: Plan) -> None:
    inp = plan.inputs
    intra = (_("; intra-node {rate}", rate=format_rate(inp.intra_node_bytes_per_s))
             if inp.gpus_per_node > 1 else "")
    render.wrapped(console, _(
        "model {params} params, {dtype} gradients ({size} per all-reduce); {nodes} nodes x {gpus}; "
        "network {rate}{intra}", params=format_count(inp.params), dtype=inp.grad_dtype,
        size=format_bytes(inp.params * inp.grad_bytes),
        nodes=inp.nodes,
        gpus=_n("{count} GPU", "{count} GPUs", inp.gpus_per_node),
        rate=format_rate(inp.inter_node_bytes_per_s), intra=intra))
    if show_memory(console, plan):
        return
    one = plan.one_node
    render.line(console, _("one node: step {step} (compute {compute}, exposed communication"
                           " {exposed})", step=_secs(one.step_s),
                           compute=_secs(inp.step_compute_s), exposed=_secs(one.exposed_s)))
    render.line(console)
    measured = any(r.measured_efficiency is not None or r.failed_in_bench for r in plan.results)
    headers = [_("setting"), _("payload"), _("comm"), _("exposed"), _("step"), _("efficiency"),
               _("vs 1 node")]
    if measured:
        headers.append(_("measured"))
    if inp.step_compute_s is None:
        headers.append(_("compute for {threshold:.0%}", threshold=inp.efficiency_threshold))
    rows = []
    for r in plan.results:
        row = [r.setting.label, format_bytes(r.payload_bytes), format_seconds(r.comm_s),
               _secs(r.exposed_s), _secs(r.step_s), _pct(r.efficiency),
               "-" if r.throughput_vs_one_node is None else f"{r.throughput_vs_one_node:.2f}x"]
        if measured:
            row.append(_("failed") if r.failed_in_bench else
                       _pct(r.measured_efficiency) + ("?" if r.measured_check else ""))
        if inp.step_compute_s is None:
            row.append(compute_needed(r.break_even_compute_s))
        rows.append(row)
    render.table(console, headers, rows,
                 title=_("{nodes} nodes vs 1 node (efficiency = 1-node step / {nodes}-node step,"
                         " same per-GPU batch: weak scaling)", nodes=inp.nodes))
    for r in plan.results:
        if r.measured_check:  # the same words as `ddpkit bench`'s table
            render.wrapped(console, _("  {setting} {efficiency}?: FAILED CHECK: {why}",
                                      setting=r.setting.label,
                                      efficiency=_pct(r.measured_efficiency), why=r.measured_check),
                           indent="    ")
    render.line(console)
    dim = "dim" if console.color else None
    for note in plan.assumptions:
        render.wrapped(console, _("  assumes: {note}", note=note), indent="    ", name=dim)
    notes = sorted({note for r in plan.results for note in r.notes})
    for note in notes:
        render.wrapped(console, _("  note: {note}", note=note), indent="    ", name=dim)
    render.line(console)
    decision_style = {"go-multi-node": "ok", "stay-on-one-node": "warn"}.get(
        plan.verdict.decision, "bold")
    render.wrapped(console, plan.verdict.text,
                   name=decision_style if console.color else None)
    if plan.verdict.cost and plan.verdict.setting != "none":
        render.wrapped(console, _("  cost: {cost}", cost=plan.verdict.cost), indent="    ")
    footer = memory_footer(plan)
    if footer:
        render.wrapped(console, _("  {footer}", footer=footer), indent="    ")
