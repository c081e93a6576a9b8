"""Shaping a ``ddpkit.bench/1`` payload for people: tables (as data), headline lines, and CSV.

Pure: everything here reads the payload dict :func:`ddpkit.bench.merge.build_payload` made (or one
loaded back from JSON) and returns strings; :mod:`ddpkit.cli.commands.bench` prints them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpkit.bench.formulas import GB
from ddpkit.bench.units import format_rate, format_seconds
from ddpkit.i18n import _, _n


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    footer: tuple[str, ...] = field(default_factory=tuple)


def _gbit(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 8 / 1e9:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)


def _speed(mbps: int | None) -> str:
    return _("unknown") if not mbps else f"{mbps / 1000:g} Gbit/s"


def tcp_table(payload: Mapping[str, Any]) -> Table | None:
    tcp = payload.get("tcp")
    if not tcp:
        return None
    speeds = {n["node"]: n.get("speed_mbps") for n in tcp.get("nodes", [])}
    names = {n["node"]: f"node{n['node']} {n.get('ifname') or '?'} {n.get('address')}"
             for n in tcp.get("nodes", [])}
    rows = []
    for r in tcp.get("pairs", []):
        rows.append((f"{names.get(r['src'], r['src'])} -> {names.get(r['dst'], r['dst'])}",
                     str(r["streams"]),
                     _gbit(r.get("bytes_per_s")) if r.get("error") is None else _("failed"),
                     f"{r['bytes'] / 1e6:.0f}", f"{r['seconds']:.2f}",
                     _("{src} / {dst}", src=_speed(speeds.get(r["src"])),
                       dst=_speed(speeds.get(r["dst"]))),
                     r.get("error") or ""))
    footer = []
    wire = tcp.get("wire_bytes_per_s")
    if wire:
        pair = tcp.get("slowest_pair") or ["?", "?"]
        footer.append(_("wire rate (slowest pair, best stream count): {rate}, node {src} -> node "
                        "{dst}", rate=format_rate(wire), src=pair[0], dst=pair[1]))
    footer += [_("failed: {text}", text=text) for text in tcp.get("failed", [])]
    return Table(_("raw TCP between nodes (receiver-timed)"),
                 (_("pair"), _("streams"), "Gbit/s", "MB", _("seconds"), _("kernel link speed"),
                  _("error")),
                 tuple(rows), tuple(footer))


def collective_tables(payload: Mapping[str, Any]) -> list[Table]:
    """One nccl-tests-style table per collective, with busbw / raw TCP next to every busbw."""
    coll = payload.get("collectives")
    if not coll:
        return []
    wire = (payload.get("tcp") or {}).get("wire_bytes_per_s")
    tables = []
    for entry in coll.get("ops", []):
        title = f"{entry['op']} (busbw factor {entry['busbw_factor']:g})"
        if not entry.get("supported", True):
            tables.append(Table(title, (_("note"),),
                                ((_("skipped: {note}", note=str(entry.get("note"))),),)))
            continue
        rows = tuple(
            (str(r["bytes"]), str(r["count"]), str(r["dtype"]), f"{r['time_us']:.1f}",
             f"{r['algbw'] / GB:.3f}", f"{r['busbw'] / GB:.3f}",
             _pct(r.get("busbw_over_tcp")), "N/A" if r.get("wrong") is None else str(r["wrong"]))
            for r in entry.get("results", []))
        footer = []
        if entry.get("avg_busbw"):
            footer.append(
                _("Avg bus bandwidth: {rate:.4f} GB/s = {share:.0%} of raw TCP",
                  rate=entry["avg_busbw"] / GB, share=entry["avg_busbw_over_tcp"])
                if entry.get("avg_busbw_over_tcp") else
                _("Avg bus bandwidth: {rate:.4f} GB/s", rate=entry["avg_busbw"] / GB))
        tables.append(Table(title, (_("size (B)"), _("count"), _("type"), _("time (us)"),
                                    "algbw (GB/s)", "busbw (GB/s)",
                                    "busbw/TCP" if wire else "busbw/TCP (n/a)",
                                    "#wrong"), rows, tuple(footer)))
    return tables


def scaling_table(payload: Mapping[str, Any]) -> Table | None:
    rows_in = payload.get("scaling") or []
    single = payload.get("single_node") or {}
    nodes = (payload.get("cluster") or {}).get("nodes")
    if not rows_in:
        if single.get("step_s"):
            return Table(_("DDP step on one node"), (_("setting"), _("1-node step")),
                         (("none", _ms(single["step_s"])),
                          *((label, _ms(step)) for label, step in
                            sorted(single.get("hook_step_s", {}).items()))))
        return None
    rows = []
    for r in rows_in:
        if r.get("ok"):
            mark = "?" if r.get("noisy") else ""  # failed its sanity check: shown, never ranked
            rows.append((r["setting"], _ms(r.get("one_node_step_s")), _ms(r.get("step_s")),
                         f"{r['samples_per_s']:.0f}", f"{r['throughput_vs_one_node']:.2f}x{mark}",
                         _pct(r.get("efficiency")) + mark,
                         _("FAILED CHECK: {noise}", noise=r["noise"]) if r.get("noisy")
                         else _("ok")))
        else:
            rows.append((r["setting"], _ms(r.get("one_node_step_s")), "-", "-", "-", "-",
                         _("FAILED: {error}", error=r.get("error", ""))))
    model = payload.get("model")
    title = (_("DDP steps: {nodes} nodes vs 1 node, {params:.1f}M-param MLP ({depth}x{width}), "
               "batch {batch} per rank, efficiency = 1-node step / N-node step, per micro-step",
               nodes=nodes, params=model["params"] / 1e6, depth=model["depth"],
               width=model["width"], batch=model["batch_per_rank"]) if model else
             _("DDP steps: {nodes} nodes vs 1 node, efficiency = 1-node step / N-node step, "
               "per micro-step", nodes=nodes))
    footer = ((_("?: the measurement failed its own sanity check: not advice; repeat the run"),)
              if any(r.get("ok") and r.get("noisy") for r in rows_in) else ())
    return Table(title, (_("setting"), _("1-node step"), _("{nodes}-node step", nodes=nodes),
                         _("samples/s"), _("vs 1 node"), _("efficiency"), _("status")),
                 tuple(rows), footer)


def socket_table(payload: Mapping[str, Any]) -> Table | None:
    sweep = payload.get("socket_sweep")
    if not sweep or sweep.get("status") != "done":
        return None
    rows = tuple(
        (_("default") if r["nthreads"] is None else str(r["nthreads"]),
         _("default") if r["nsocks_perthread"] is None else str(r["nsocks_perthread"]),
         "-" if r["busbw"] is None else f"{r['busbw'] / GB:.3f}",
         _("ok") if r["ok"] else _("failed: {text}", text=r.get("error") or ""))
        for r in sweep["results"])
    best = sweep.get("best")
    footer: tuple[str, ...] = ()
    if best:
        if not best.get("worth_it"):
            footer = (_("NCCL's defaults are within 5% of the best ({command})",
                        command=best["command"]),)
        elif best.get("vs_default"):
            footer = (_("best: {threads} threads x {socks} sockets ({gain:.2f}x the default): "
                        "{command}", threads=best["nthreads"], socks=best["nsocks_perthread"],
                        gain=best["vs_default"], command=best["command"]),)
        else:
            footer = (_("best: {threads} threads x {socks} sockets: {command}",
                        threads=best["nthreads"], socks=best["nsocks_perthread"],
                        command=best["command"]),)
    return Table(_("NCCL socket threads x sockets per thread (all_reduce busbw, largest sizes)"),
                 ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD", "busbw (GB/s)", _("status")),
                 rows, footer)


def failed_stages(payload: Mapping[str, Any]) -> list[str]:
    """Every job that failed: what it was, its cause (the ranks' exception where they printed one),
    and a ``fix:`` line, so a failed stage is explained where the tables are read."""
    lines: list[str] = []
    for job in payload.get("jobs") or []:
        if job.get("ok"):
            continue
        cause = job.get("cause") or job.get("message") or _("no result was written")
        error_id = job.get("error_id") or "failed"
        lines.append(_("FAILED {name} [{error_id}] (stuck in {stage}): {cause}", name=job["name"],
                       error_id=error_id, stage=job["stage"], cause=cause)
                     if job.get("stage") else
                     _("FAILED {name} [{error_id}]: {cause}", name=job["name"], error_id=error_id,
                       cause=cause))
        lines.append(_("  fix: {hint}", hint=job.get("hint") or _(
            "rerun with --show-output to see the ranks output")))
    if lines:
        lines.append("")
    return lines


def headline(payload: Mapping[str, Any]) -> list[str]:
    """The numbers that answer "is multi-node worth it here": busbw vs wire, efficiency, advice."""
    lines: list[str] = []
    cluster = payload.get("cluster") or {}
    nodes = cluster.get("nodes")
    lines.append(_n("{count} node x {ranks} rank(s), {backend} on {device}, interface {interface} "
                    "({address})",
                    "{count} nodes x {ranks} rank(s), {backend} on {device}, interface "
                    "{interface} ({address})", nodes if isinstance(nodes, int) else 2,
                    count=nodes, ranks=cluster.get("gpus_per_node"),
                    backend=cluster.get("backend") or _("backend unknown"),
                    device=cluster.get("device") or _("unknown device"),
                    interface=cluster.get("interface"), address=cluster.get("address")))
    inter = payload.get("inter_node")
    wire = (payload.get("tcp") or {}).get("wire_bytes_per_s")
    if inter:
        rate, size = format_rate(inter["busbw_bytes_per_s"]), inter["bytes"] / 2**20
        lines.append(_("all_reduce busbw {rate} at {size:g} MiB = {share:.0%} of raw TCP {wire}",
                       rate=rate, size=size, share=inter["busbw_over_tcp"],
                       wire=format_rate(wire)) if wire else
                     _("all_reduce busbw {rate} at {size:g} MiB", rate=rate, size=size))
    elif wire:
        lines.append(_("raw TCP {rate}", rate=format_rate(wire)))
    rec = payload.get("recommendation")
    if rec:
        lines.append(rec["text"])
        if rec.get("cost") and rec.get("setting") not in (None, "none"):
            lines.append(_("  cost: {cost}", cost=rec["cost"]))
    sweep = payload.get("socket_sweep")
    if sweep and sweep.get("status") == "skipped":
        lines.append(_("socket sweep skipped: {reason}", reason=sweep["reason"]))
    return lines


CSV_COLUMNS = ("section", "name", "src_node", "dst_node", "streams", "bytes", "count", "dtype",
               "time_us", "algbw_bytes_per_s", "busbw_bytes_per_s", "busbw_over_tcp", "wrong",
               "bytes_per_s", "one_node_step_s", "step_s", "samples_per_s", "efficiency", "ok",
               "error")


def csv_text(payload: Mapping[str, Any]) -> str:
    """Every measurement as one CSV row (long format, fixed columns, SI base units)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for r in (payload.get("tcp") or {}).get("pairs", []):
        writer.writerow({"section": "tcp", "name": f"{r['src']}->{r['dst']}", "src_node": r["src"],
                         "dst_node": r["dst"], "streams": r["streams"], "bytes": r["bytes"],
                         "bytes_per_s": r.get("bytes_per_s"), "ok": r.get("error") is None,
                         "error": r.get("error")})
    for entry in (payload.get("collectives") or {}).get("ops", []):
        for r in entry.get("results", []):
            writer.writerow({"section": "collective", "name": entry["op"], "bytes": r["bytes"],
                             "count": r["count"], "dtype": r["dtype"], "time_us": r["time_us"],
                             "algbw_bytes_per_s": r["algbw"], "busbw_bytes_per_s": r["busbw"],
                             "busbw_over_tcp": r.get("busbw_over_tcp"), "wrong": r.get("wrong"),
                             "ok": not r.get("wrong")})
    for r in payload.get("scaling") or []:
        writer.writerow({"section": "scaling", "name": r["setting"],
                         "one_node_step_s": r.get("one_node_step_s"), "step_s": r.get("step_s"),
                         "samples_per_s": r.get("samples_per_s"), "efficiency": r.get("efficiency"),
                         "ok": r["ok"], "error": r.get("error")})
    for r in (payload.get("socket_sweep") or {}).get("results", []):
        name = "default" if r["nthreads"] is None else f"{r['nthreads']}x{r['nsocks_perthread']}"
        writer.writerow({"section": "socket", "name": name, "busbw_bytes_per_s": r["busbw"],
                         "ok": r["ok"], "error": r.get("error")})
    return buffer.getvalue()
