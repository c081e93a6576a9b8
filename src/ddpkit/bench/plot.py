"""``ddpkit bench --plot FILE.png``: busbw vs size per collective with the raw TCP line, and the
efficiency of each scaling setting as bars. matplotlib is the optional extra ``plot``
(``pip install 'ddpkit[plot]'``, ``pip install -e '.[plot]'`` in a source checkout); it is
imported only here, only when a plot is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit.atomic_file import replacing
from ddpkit.errors import EnvironmentProblem
from ddpkit.i18n import _


@dataclass(frozen=True)
class PlotData:
    busbw: tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...]  # op, sizes, busbw (Gbit/s)
    wire_gbit: float | None
    settings: tuple[str, ...]
    efficiency: tuple[float, ...]  # 0 for a failed setting
    failed: tuple[bool, ...]
    threshold: float | None
    suspect: tuple[bool, ...] = ()  # ran, but failed its own sanity check: marked, not advice


def plot_data(payload: Mapping[str, Any], threshold: float | None = None) -> PlotData:
    """What the figure shows, taken from a ``ddpkit.bench/1`` payload."""
    series = []
    for entry in (payload.get("collectives") or {}).get("ops", []):
        rows = entry.get("results", [])
        if rows:
            series.append((entry["op"], tuple(int(r["bytes"]) for r in rows),
                           tuple(float(r["busbw"]) * 8 / 1e9 for r in rows)))
    wire = (payload.get("tcp") or {}).get("wire_bytes_per_s")
    scaling = payload.get("scaling") or []
    return PlotData(
        busbw=tuple(series), wire_gbit=None if wire is None else wire * 8 / 1e9,
        settings=tuple(r["setting"] for r in scaling),
        efficiency=tuple(float(r.get("efficiency") or 0.0) if r.get("ok") else 0.0
                         for r in scaling),
        failed=tuple(not r.get("ok") for r in scaling), threshold=threshold,
        suspect=tuple(bool(r.get("ok") and r.get("noisy")) for r in scaling))


def source_checkout(module_file: str = __file__) -> Path | None:
    """The source tree this ddpkit runs from (``pip install -e``: src/ddpkit under a
    pyproject.toml), or None for an installed wheel."""
    root = Path(module_file).resolve().parents[3]  # <root>/src/ddpkit/bench/plot.py
    if (root / "pyproject.toml").is_file() and (root / "src" / "ddpkit").is_dir():
        return root
    return None


def require_matplotlib() -> Any:
    """The ``matplotlib`` module with a file-only backend; EnvironmentProblem if it is missing."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as exc:
        root = source_checkout()
        install = (f"pip install -e '{root}[plot]'" if root is not None
                   else "pip install 'ddpkit[plot]'")  # a source checkout has no such wheel
        raise EnvironmentProblem(
            "matplotlib-missing", _("--plot needs matplotlib, which is not installed"),
            _("{install} (or pip install matplotlib), or drop --plot; --json and --csv need "
              "nothing extra", install=install)) from exc
    matplotlib.use("Agg")
    return matplotlib


def write_plot(payload: Mapping[str, Any], path: str | Path, threshold: float | None = None) -> None:
    """Draw the figure into ``path`` (PNG, SVG or PDF by its suffix), atomically."""
    require_matplotlib()
    pyplot = importlib.import_module("matplotlib.pyplot")
    data = plot_data(payload, threshold)
    panels = (1 if data.busbw else 0) + (1 if data.settings else 0)
    if panels == 0:
        raise EnvironmentProblem("nothing-to-plot", _("--plot: the bench measured no collective "
                                                        "and no scaling setting"),
                                 _("add --collectives or --scaling"))
    figure, axes = pyplot.subplots(1, panels, figsize=(6.5 * panels, 4.5), squeeze=False)
    column = 0
    if data.busbw:
        ax = axes[0][column]
        for op, sizes, values in data.busbw:
            ax.plot(sizes, values, marker="o", label=op)
        if data.wire_gbit is not None:
            ax.axhline(data.wire_gbit, color="black", linestyle="--",
                       label=f"raw TCP {data.wire_gbit:.2f} Gbit/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (Gbit/s)")
        ax.set_title("bus bandwidth vs size")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        column += 1
    if data.settings:
        ax = axes[0][column]
        suspect = data.suspect or (False,) * len(data.settings)
        colours = ["lightgrey" if failed else "white" if odd else "tab:blue"
                   for failed, odd in zip(data.failed, suspect)]
        bars = ax.bar(range(len(data.settings)), [e * 100 for e in data.efficiency], color=colours,
                      edgecolor=["tab:red" if odd else "none" for odd in suspect])
        for bar, failed, odd, value in zip(bars, data.failed, suspect, data.efficiency):
            if odd:
                bar.set_hatch("//")
            ax.annotate("failed" if failed else f"{value:.0%}?\nfailed check" if odd
                        else f"{value:.0%}",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize="small",
                        color="tab:red" if odd else "black")
        ax.margins(y=0.15)  # room for the labels over the tallest bar
        if any(suspect):
            ax.set_xlabel("hatched: failed its own sanity check (not advice; repeat the run)",
                          color="tab:red", fontsize="small")
        if data.threshold is not None:
            ax.axhline(data.threshold * 100, color="black", linestyle="--",
                       label=f"threshold {data.threshold:.0%}")
            ax.legend(fontsize="small")
        ax.set_xticks(range(len(data.settings)))
        ax.set_xticklabels(data.settings, rotation=30, ha="right", fontsize="small")
        ax.set_ylabel("parallel efficiency (%)")
        ax.set_title("efficiency per setting (1-node step / N-node step)")
    save_figure(pyplot, figure, path)


def save_figure(pyplot: Any, figure: Any, path: str | Path) -> None:
    """Lay out ``figure``, write it to ``path`` atomically (format by suffix), and close it."""
    figure.tight_layout()
    try:
        with replacing(path, suffix=Path(path).suffix) as tmp:
            figure.savefig(tmp)
    finally:
        pyplot.close(figure)
