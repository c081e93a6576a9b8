"""The bench's strategies block for people: step time and memory per rank, measured beside plan's
prediction (tables as data; :mod:`ddpkit.cli.commands.bench` prints them). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpkit.bench.report import Table
from ddpkit.bench.units import format_rate, format_seconds
from ddpkit.i18n import _


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)


def _mb(count: float | None) -> str:
    return "-" if count is None else f"{count / 1e6:.1f} MB"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


def strategy_tables(payload: Mapping[str, Any]) -> list[Table]:
    block = payload.get("strategies")
    if not block or not block.get("rows"):
        return []
    rows = block["rows"]
    first = next((r for r in rows if r.get("model")), None)
    link = block.get("link")
    what = ""
    if first:
        m = first["model"]
        what = _("{nodes} nodes x {ranks} ranks, {params:.1f}M-param MLP ({depth}x{width}), batch "
                 "{batch}/rank", nodes=first["nodes"], ranks=first["ranks_per_node"],
                 params=m["params"] / 1e6, depth=m["depth"], width=m["width"],
                 batch=m["batch_per_rank"])
    footer = [_("plan: {rate} inter-node ({basis}), overlap {overlap:g}",
                rate=format_rate(link["inter_node_bytes_per_s"]), basis=link["basis"],
                overlap=link["overlap"]),
              _("compute from each strategy's measured 1-node step"),
              _("at bytes: measured / plan's step with the link bytes measured in place of its "
                "count"),
              _("overlap: the fraction of that communication the run hid (plan's overlap that "
                "fits)"),
              ] if link else list(block.get("notes", []))
    steps, memory = [], []
    for r in rows:
        status = _("ok") if r.get("ok") else _("FAILED: {error}", error=r.get("error", ""))
        got, plan, ratio = r.get("measured") or {}, r.get("predicted") or {}, r.get("ratio") or {}
        steps.append((r["strategy"], _ms(got.get("one_node_step_s")), _ms(got.get("step_s")),
                      _ms(plan.get("step_s")), _x(ratio.get("step")),
                      _x(ratio.get("step_at_measured_bytes")), _x(got.get("implied_overlap")),
                      _mb(got.get("link_bytes_per_step")), _mb(plan.get("link_bytes_per_step")),
                      status))
        memory.append((r["strategy"], _mb(got.get("state_bytes")), _mb(plan.get("state_bytes")),
                       _x(ratio.get("state")), _mb(got.get("peak_rss_delta")),
                       _mb(plan.get("model_state_bytes")), _mb(got.get("cuda_peak"))))
    return [
        Table(_("strategies: measured vs plan, {what}", what=what),
              (_("strategy"), _("1-node step"), _("step"), _("plan"), _("meas/plan"), _("at bytes"),
               _("overlap"), _("link/step"), _("plan link"), _("status")), tuple(steps),
              (*footer, _("link/step: the busiest node's interface bytes per step, one direction"))),
        Table(_("strategies: memory per rank (the largest rank) vs plan, Adam fp32"),
              (_("strategy"), _("params+grads+opt"), _("plan"), _("meas/plan"), _("peak RSS"),
               _("plan+buffers"), _("CUDA peak")), tuple(memory),
              (_("peak RSS: resident memory over build and steps above the start of the phase"),)),
    ]
