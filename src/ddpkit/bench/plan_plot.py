"""``ddpkit plan --plot FILE.png``: memory per GPU per strategy (model states, buffers,
activations) as stacked bars against the GPU's usable memory, on N nodes and on one node.
matplotlib is the optional extra ``plot``; imported only here (:mod:`ddpkit.bench.plot`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from ddpkit.bench.planning.fit import FitPlan
from ddpkit.bench.plot import require_matplotlib, save_figure

GB = 1e9


@dataclass(frozen=True)
class MemoryBars:
    strategies: tuple[str, ...]
    states: tuple[tuple[float, ...], tuple[float, ...]]  # GB per GPU: (N nodes, one node)
    buffers: tuple[tuple[float, ...], tuple[float, ...]]
    activations: tuple[tuple[float, ...], tuple[float, ...]]
    usable_gb: float | None
    nodes: int


def memory_bars(fit: FitPlan) -> MemoryBars:
    """What the figure shows, in GB per GPU, from a plan's memory-first results."""
    runs = [[r.memory for r in fit.results], [r.memory_one_node for r in fit.results]]
    return MemoryBars(
        strategies=tuple(r.strategy for r in fit.results),
        states=(tuple(m.states / GB for m in runs[0]), tuple(m.states / GB for m in runs[1])),
        buffers=(tuple(m.buffers / GB for m in runs[0]), tuple(m.buffers / GB for m in runs[1])),
        activations=(tuple((m.activations or 0.0) / GB for m in runs[0]),
                     tuple((m.activations or 0.0) / GB for m in runs[1])),
        usable_gb=None if fit.usable_bytes is None else fit.usable_bytes / GB,
        nodes=fit.inputs.nodes)


def write_plan_plot(fit: FitPlan, path: str | Path) -> None:
    """Draw the figure into ``path`` (PNG, SVG or PDF by its suffix), atomically."""
    require_matplotlib()
    pyplot = importlib.import_module("matplotlib.pyplot")
    data = memory_bars(fit)
    figure, axes = pyplot.subplots(1, 2, figsize=(13, 4.5), squeeze=False, sharey=True)
    titles = (f"{data.nodes} nodes", "1 node")
    for column in (0, 1):
        ax = axes[0][column]
        xs = range(len(data.strategies))
        states, buffers = data.states[column], data.buffers[column]
        acts = data.activations[column]
        ax.bar(xs, states, label="model states (ZeRO)", color="tab:blue")
        ax.bar(xs, buffers, bottom=states, label="buffers / working set", color="tab:orange")
        ax.bar(xs, acts, bottom=[s + b for s, b in zip(states, buffers)], label="activations",
               color="tab:green")
        if data.usable_gb is not None:
            ax.axhline(data.usable_gb, color="black", linestyle="--",
                       label=f"usable {data.usable_gb:.1f} GB")
        totals = [s + b + a for s, b, a in zip(states, buffers, acts)]
        # Linear, cut at 1.6 x the usable memory: the strategies near the line stay readable;
        # a bar over the top is labelled with its total.
        top = max(totals) * 1.1 if data.usable_gb is None else min(max(totals) * 1.1,
                                                                   data.usable_gb * 1.6)
        ax.set_ylim(0, top)
        for x, total in zip(xs, totals):
            ax.annotate(f"{total:.3g}", (x, min(total, top * 0.97)), ha="center", va="bottom",
                        fontsize="x-small")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(data.strategies, rotation=30, ha="right", fontsize="small")
        ax.set_ylabel("memory per GPU (GB)")
        ax.set_title(f"memory per GPU, {titles[column]}")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    save_figure(pyplot, figure, path)
