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
    return "unknown" if not mbps else f"{mbps / 1000:g} Gbit/s"


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
                     _gbit(r.get("bytes_per_s")) if r.get("error") is None else "failed",
                     f"{r['bytes'] / 1e6:.0f}", f"{r['seconds']:.2f}",
                     f"{_speed(speeds.get(r['src']))} / {_speed(speeds.get(r['dst']))}",
                     r.get("error") or ""))
    footer = []
    wire = tcp.get("wire_bytes_per_s")
    if wire:
        pair = tcp.get("slowest_pair") or ["?", "?"]
        footer.append(f"wire rate (slowest pair, best stream count): {format_rate(wire)}, node "
                      f"{pair[0]} -> node {pair[1]}")
    footer += [f"failed: {text}" for text in tcp.get("failed", [])]
    return Table("raw TCP between nodes (receiver-timed)",
                 ("pair", "streams", "Gbit/s", "MB", "seconds", "kernel link speed", "error"),
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
            tables.append(Table(title, ("note",), ((f"skipped: {entry.get('note')}",),)))
            continue
        rows = tuple(
            (str(r["bytes"]), str(r["count"]), str(r["dtype"]), f"{r['time_us']:.1f}",
             f"{r['algbw'] / GB:.3f}", f"{r['busbw'] / GB:.3f}",
             _pct(r.get("busbw_over_tcp")), "N/A" if r.get("wrong") is None else str(r["wrong"]))
            for r in entry.get("results", []))
        footer = []
        if entry.get("avg_busbw"):
            footer.append(f"Avg bus bandwidth: {entry['avg_busbw'] / GB:.4f} GB/s"
                          + (f" = {entry['avg_busbw_over_tcp']:.0%} of raw TCP"
                             if entry.get("avg_busbw_over_tcp") else ""))
        tables.append(Table(title, ("size (B)", "count", "type", "time (us)", "algbw (GB/s)",
                                    "busbw (GB/s)", "busbw/TCP" if wire else "busbw/TCP (n/a)",
                                    "#wrong"), rows, tuple(footer)))
    return tables


def scaling_table(payload: Mapping[str, Any]) -> Table | None:
    rows_in = payload.get("scaling") or []
    single = payload.get("single_node") or {}
    nodes = (payload.get("cluster") or {}).get("nodes")
    if not rows_in:
        if single.get("step_s"):
            return Table("DDP step on one node", ("setting", "1-node step"),
                         (("none", _ms(single["step_s"])),
                          *((label, _ms(step)) for label, step in
                            sorted(single.get("hook_step_s", {}).items()))))
        return None
    rows = []
    for r in rows_in:
        if r.get("ok"):
            rows.append((r["setting"], _ms(r.get("one_node_step_s")), _ms(r.get("step_s")),
                         f"{r['samples_per_s']:.0f}", f"{r['throughput_vs_one_node']:.2f}x",
                         _pct(r.get("efficiency")),
                         f"ok, noisy: {r['noise']}" if r.get("noisy") else "ok"))
        else:
            rows.append((r["setting"], _ms(r.get("one_node_step_s")), "-", "-", "-", "-",
                         f"FAILED: {r.get('error', '')}"))
    model = payload.get("model")
    what = (f"{model['params'] / 1e6:.1f}M-param MLP ({model['depth']}x{model['width']}), batch "
            f"{model['batch_per_rank']} per rank, " if model else "")
    title = (f"DDP steps: {nodes} nodes vs 1 node, {what}efficiency = 1-node step / N-node step, "
             "per micro-step")
    return Table(title, ("setting", "1-node step", f"{nodes}-node step", "samples/s",
                         "vs 1 node", "efficiency", "status"), tuple(rows))


def socket_table(payload: Mapping[str, Any]) -> Table | None:
    sweep = payload.get("socket_sweep")
    if not sweep or sweep.get("status") != "done":
        return None
    rows = tuple(
        ("default" if r["nthreads"] is None else str(r["nthreads"]),
         "default" if r["nsocks_perthread"] is None else str(r["nsocks_perthread"]),
         "-" if r["busbw"] is None else f"{r['busbw'] / GB:.3f}",
         "ok" if r["ok"] else f"failed: {r.get('error') or ''}")
        for r in sweep["results"])
    best = sweep.get("best")
    footer: tuple[str, ...] = ()
    if best:
        gain = f" ({best['vs_default']:.2f}x the default)" if best.get("vs_default") else ""
        footer = (f"best: {best['nthreads']} threads x {best['nsocks_perthread']} sockets"
                  f"{gain}: {best['command']}" if best.get("worth_it") else
                  f"NCCL's defaults are within 5% of the best ({best['command']})",)
    return Table("NCCL socket threads x sockets per thread (all_reduce busbw, largest sizes)",
                 ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD", "busbw (GB/s)", "status"),
                 rows, footer)


def failed_stages(payload: Mapping[str, Any]) -> list[str]:
    """Every job that failed: what it was, its cause (the ranks' exception where they printed one),
    and a ``fix:`` line, so a failed stage is explained where the tables are read."""
    lines = []
    for job in payload.get("jobs") or []:
        if job.get("ok"):
            continue
        cause = job.get("cause") or job.get("message") or "no result was written"
        where = f" (stuck in {job['stage']})" if job.get("stage") else ""
        lines.append(f"FAILED {job['name']} [{job.get('error_id') or 'failed'}]{where}: {cause}")
        lines.append(f"  fix: {job.get('hint') or 'rerun with --show-output to see the ranks output'}")
    if lines:
        lines.append("")
    return lines


def headline(payload: Mapping[str, Any]) -> list[str]:
    """The numbers that answer "is multi-node worth it here": busbw vs wire, efficiency, advice."""
    lines = []
    cluster = payload.get("cluster") or {}
    nodes = cluster.get("nodes")
    lines.append(f"{nodes} node{'' if nodes == 1 else 's'} x {cluster.get('gpus_per_node')} rank(s), "
                 f"{cluster.get('backend') or 'backend unknown'} on "
                 f"{cluster.get('device') or 'unknown device'}, interface "
                 f"{cluster.get('interface')} ({cluster.get('address')})")
    inter = payload.get("inter_node")
    wire = (payload.get("tcp") or {}).get("wire_bytes_per_s")
    if inter:
        text = (f"all_reduce busbw {format_rate(inter['busbw_bytes_per_s'])} at "
                f"{inter['bytes'] / 2**20:g} MiB")
        if wire:
            text += f" = {inter['busbw_over_tcp']:.0%} of raw TCP {format_rate(wire)}"
        lines.append(text)
    elif wire:
        lines.append(f"raw TCP {format_rate(wire)}")
    rec = payload.get("recommendation")
    if rec:
        lines.append(rec["text"])
        if rec.get("cost") and rec.get("setting") not in (None, "none"):
            lines.append(f"  cost: {rec['cost']}")
    sweep = payload.get("socket_sweep")
    if sweep and sweep.get("status") == "skipped":
        lines.append(f"socket sweep skipped: {sweep['reason']}")
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
