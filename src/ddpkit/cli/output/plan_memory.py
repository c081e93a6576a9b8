"""`ddpkit plan`'s memory-first output: the strategies table, the verdict and how to apply it."""

from __future__ import annotations

from ddpkit.bench.planning.gpus import GPUS
from ddpkit.bench.planning.plan import Plan
from ddpkit.bench.planning.strategies import StrategyResult
from ddpkit.bench.units import format_bytes, format_seconds
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.i18n import _, _n, localized


def _fits(fits: bool | None, total: float, usable: int | None, host_fits: bool | None) -> str:
    if fits is None or usable is None:
        return "?"
    if not fits and total <= usable and host_fits is False:
        return _("host")  # the GPU holds it, the node's RAM does not hold the offloaded state
    return _("yes") if fits else f"-{format_bytes(total - usable)}"


def _row(r: StrategyResult, usable: int | None) -> list[str]:
    eff = "-" if r.efficiency is None or not r.fits_one_node else f"{r.efficiency:.0%}"
    return [r.strategy + (" *" if r.adapters_only else ""), format_bytes(r.memory.total),
            _fits(r.fits, r.memory.total, usable, r.host_fits),
            format_bytes(r.memory_one_node.total),
            _fits(r.fits_one_node, r.memory_one_node.total, usable, r.host_fits_one_node),
            format_bytes(r.inter_node_bytes), format_seconds(r.comm_s),
            "-" if r.step_s is None else format_seconds(r.step_s), eff]


def show_memory(console: Console, plan: Plan) -> bool:
    """Print the memory-first plan when plain DDP does not fit; False leaves the DDP output."""
    fit = plan.fit
    if fit.verdict is None:
        return False
    inp, mem = plan.inputs, fit.inputs
    gpu = fit.gpu.title if fit.gpu is not None else "GPU"
    values = {"gpu": gpu, "usable": format_bytes(fit.usable_bytes or 0),
              "optimizer": mem.optimizer, "layers": mem.layers, "hidden": mem.hidden}
    if inp.step_compute_s is None:
        render.wrapped(console, _("{gpu}: {usable} usable per GPU; {optimizer}, {layers} layers"
                                  " x {hidden}", **values))
    else:
        render.wrapped(console, _("{gpu}: {usable} usable per GPU; {optimizer}, {layers} layers"
                                  " x {hidden}; compute {compute}/step, overlap {overlap:g}",
                                  compute=format_seconds(inp.step_compute_s),
                                  overlap=inp.overlap, **values))
    render.line(console)
    n = inp.nodes
    headers = [_("strategy"), _n("{count} node", "{count} nodes", n), _("fits"), _("1 node"),
               _("fits"), _("link/step"), _("comm"), _("step"), _("vs 1 node")]
    render.table(console, headers, [_row(r, fit.usable_bytes) for r in fit.results],
                 title=_("memory per GPU, traffic through each node's link per step, step time"))
    render.line(console, render.style(console, localized(_(
        "  vs 1 node: same strategy's step on 1 node / on {n} nodes (weak scaling); "
        "*: adapters only", n=n)), "dim"))
    if any(r.host_fits is False or r.host_fits_one_node is False for r in fit.results):
        render.line(console, render.style(console, localized(_(
            "  host: fits the GPU, but the offloaded state is more than the node's RAM")), "dim"))
    for note in fit.notes:
        render.wrapped(console, _("  assumes: {note}", note=note), indent="    ",
                       name="dim" if console.color else None)
    render.line(console)
    style = {"go-multi-node": "ok", "stay-on-one-node": "warn"}.get(plan.verdict.decision, "bold")
    render.wrapped(console, plan.verdict.text, name=style if console.color else None)
    if plan.verdict.apply:
        render.line(console, _("  apply {strategy}:", strategy=plan.verdict.strategy))
        for text in plan.verdict.apply:
            render.line(console, f"    {text}")
    return True


def memory_footer(plan: Plan) -> str | None:
    """One line for the DDP output: what plain DDP needs per GPU, and against which GPU."""
    fit = plan.fit
    ddp = fit.results[0].memory
    what = "" if ddp.activations is not None else _(" (model state, no activations)")
    if fit.usable_bytes is not None:
        return _("memory: plain DDP fits, {total} per GPU{what} of {usable} usable",
                 total=format_bytes(ddp.total), what=what, usable=format_bytes(fit.usable_bytes))
    largest = max(GPUS, key=lambda g: g.memory_bytes)
    more = (_(", more than any GPU in ddpkit's table ({gpu})", gpu=largest.title)
            if ddp.total > largest.memory_bytes else "")
    return _("memory: plain DDP needs {total} per GPU{what}{more}; pass --gpu or --gpu-memory to"
             " check which strategies fit", total=format_bytes(ddp.total), what=what, more=more)
