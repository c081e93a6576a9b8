"""`ddpkit test` as data: the worker's arguments, and reading its reports into a verdict."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit.i18n import Text, _, _n
from ddpkit.wording import clauses

WORKER_MODULE = "ddpkit.workers.ddp_test"
CHECK_ORDER = ("init", "all_reduce", "interface", "broadcast", "all_gather", "barrier", "ddp",
               "bandwidth")
QUICK_SIZES = "256K,1M,4M"
FULL_SIZES = "1M,4M,16M,64M"


def default_job_timeout(pg_timeout: float) -> float:
    """How long a whole `ddpkit test` may take: start-up, one process-group timeout for a lagging
    rank, the checks themselves, and the same again for the final exchange."""
    return 2 * pg_timeout + 60


def worker_args(report_dir: Path, *, backend: str, quick: bool, pg_timeout: float) -> list[str]:
    return [
        "--report-dir", str(report_dir),
        "--backend", backend,
        "--sizes", QUICK_SIZES if quick else FULL_SIZES,
        "--iters", "3" if quick else "5",
        "--timeout", f"{pg_timeout:g}",
    ]


MAX_RANK_COLUMNS = 8  # beyond this many ranks, the healthy ones share one column


@dataclass(frozen=True)
class TestVerdict:
    __test__ = False  # not a pytest class (tests import it)

    ok: bool
    nodes: int | None
    ranks_per_node: int | None
    world_size: int | None
    ranks: tuple[dict[str, Any], ...]  # one report per rank that reported
    missing_ranks: tuple[int, ...]  # ranks expected but silent (only known when complete)
    stages: dict[int, str]  # rank -> last stage seen in its stage file (this node's ranks)
    complete: bool  # the gathered report (every rank) was found

    def rows(self) -> tuple[list[str], list[list[str]]]:
        """A check × rank table: one short column per rank, then the detail (rank 0's, or the
        first failing rank's). Beyond ``MAX_RANK_COLUMNS`` ranks, the ranks with a failed or
        missing check keep their columns and all the others share one summary column, so the
        table fits a terminal at any world size."""
        shown = list(self.ranks)
        others: list[dict[str, Any]] = []
        if len(shown) > MAX_RANK_COLUMNS:
            shown = [r for r in self.ranks if _has_trouble(r)][:MAX_RANK_COLUMNS]
            others = [r for r in self.ranks if r not in shown]
        headers: list[str] = [_("check")]
        headers += [f"r{r['rank']}@{r.get('host', '?')}" for r in shown]
        if others:
            headers.append(_n("{count} other rank", "{count} other ranks", len(others)))
        headers.append(_("detail"))
        rows = []
        for name in CHECK_ORDER:
            row = [name]
            detail = ""
            for report in self.ranks:
                entry = _entry(report, name)
                if entry is None:
                    continue
                if not entry["ok"] and not detail.startswith("rank"):
                    detail = _("rank {rank}: {detail}", rank=report["rank"],
                               detail=detail_text(entry))
                elif not detail:
                    detail = detail_text(entry)
            row += [_cell(_entry(report, name)) for report in shown]
            if others:
                row.append(_summary_cell([_cell(_entry(report, name)) for report in others]))
            rows.append(row + [detail])
        return headers, rows

    def failed_checks(self) -> list[str]:
        out: list[str] = []
        for report in self.ranks:
            host = report.get("host", "?")
            for entry in report.get("checks", []):
                if not entry["ok"]:
                    out.append(_("rank {rank} ({host}): {check} failed: {detail}",
                                 rank=report["rank"], host=host, check=entry["name"],
                                 detail=detail_text(entry)))
            if report.get("error"):
                out.append(_("rank {rank} ({host}): {error}", rank=report["rank"], host=host,
                             error=report["error"]))
        return out

    def headline(self) -> Text:
        """The test's one-line answer (the README quotes it), in the user's language."""
        ranks = _n("{count} rank", "{count} ranks", self.ranks_per_node or 1)
        shape = (_("{nodes} × {ranks}", nodes=_n("{count} node", "{count} nodes", self.nodes),
                   ranks=ranks) if self.nodes
                 else _n("{count} rank", "{count} ranks", len(self.ranks)))
        if not self.ok:
            problems = self.failed_checks() + [
                _("rank {rank} stuck in {stage}", rank=rank, stage=stage)
                for rank, stage in sorted(self.stages.items())
                if stage not in ("done", "failed", "exchange")]
            return _("{shape}: FAILED · {problems}", shape=shape,
                     problems=clauses(problems) if problems
                     else _("not every rank reported"))
        bandwidth = self._largest_bandwidth()
        via = ", ".join(sorted({name for r in self.ranks for name in r.get("interfaces_used", [])}))
        if bandwidth is None:
            return (_("{shape}: all checks passed via {via}", shape=shape, via=via) if via
                    else _("{shape}: all checks passed", shape=shape))
        values = {"shape": shape, "busbw": bandwidth["busbw_gbps"],
                  "size": _size_text(bandwidth["bytes"])}
        if via:
            return _("{shape}: all checks passed · all_reduce busbw {busbw:.2f} GB/s at {size} "
                     "via {via}", via=via, **values)
        return _("{shape}: all checks passed · all_reduce busbw {busbw:.2f} GB/s at {size} "
                 "via loopback", **values)

    def _largest_bandwidth(self) -> dict[str, Any] | None:
        rank0 = next((r for r in self.ranks if r["rank"] == 0), None)
        if not rank0 or not rank0.get("bandwidth"):
            return None
        return dict(max(rank0["bandwidth"], key=lambda b: b["bytes"]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "summary": self.headline(), "nodes": self.nodes,
            "ranks_per_node": self.ranks_per_node, "world_size": self.world_size,
            "complete": self.complete, "missing_ranks": list(self.missing_ranks),
            "stages": {str(k): v for k, v in sorted(self.stages.items())},
            "ranks": list(self.ranks),
        }


def read_verdict(report_dir: Path) -> TestVerdict:
    """The job's verdict from this node's report directory (complete or partial)."""
    stages = _stages(report_dir)
    gathered = _load(report_dir / "report.json")
    if gathered is not None:
        ranks = tuple(sorted(gathered.get("ranks", []), key=lambda r: r["rank"]))
        world = int(gathered.get("world_size", len(ranks)))
        missing = tuple(sorted(set(range(world)) - {r["rank"] for r in ranks}))
        return TestVerdict(ok=bool(gathered.get("ok")) and not missing,
                           nodes=gathered.get("nodes"), ranks_per_node=gathered.get("ranks_per_node"),
                           world_size=world, ranks=ranks, missing_ranks=missing, stages=stages,
                           complete=True)
    partial = []
    for path in sorted(report_dir.glob("rank*.json")):
        doc = _load(path)
        if doc is not None:
            partial.append(doc)
    return TestVerdict(ok=False, nodes=None, ranks_per_node=None, world_size=None,
                       ranks=tuple(sorted(partial, key=lambda r: r["rank"])), missing_ranks=(),
                       stages=stages, complete=False)


def _stages(report_dir: Path) -> dict[int, str]:
    stages = {}
    for path in sorted(report_dir.glob("rank*.stage")):
        number = path.stem.removeprefix("rank")
        if number.isdigit():
            try:
                stages[int(number)] = path.read_text().split()[0]
            except (OSError, IndexError):
                continue
    return stages


def _load(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


# What a rank's check found, by the id its worker sends beside the English detail
# (workers/ddp_test.py): the same words, in the user's language.
_DETAILS: dict[str, Text] = {
    "sum": _("sum of 1..{n} = {total:g}"),
    "sum-wrong": _("sum of 1..{n} = {total:g}, {wrong} wrong"),
    "broadcast": _("4096 floats from rank 0"),
    "broadcast-mismatch": _("4096 floats from rank 0: mismatch"),
    "parts": _("{n} parts"),
    "parts-mismatch": _("{n} parts: mismatch"),
    "busbw": _("busbw {busbw:.3f} GB/s at {size}"),
    "ddp": _("{steps} steps, {params} params bit-identical across ranks"),
    "ddp-differ": _("{steps} steps, {params} params DIFFER from rank 0"),
    "ddp-still": _("{steps} steps, {params} params bit-identical across ranks, but parameters "
                   "never changed"),
    "ddp-differ-still": _("{steps} steps, {params} params DIFFER from rank 0, but parameters "
                          "never changed"),
}


def detail_text(entry: dict[str, Any]) -> str:
    """A check's detail: its words by id when the rank sent them (numbers, short plain strings),
    else the English detail as the rank wrote it."""
    english = str(entry.get("detail", ""))
    say = entry.get("say")
    if not isinstance(say, dict) or not isinstance(say.get("id"), str):
        return english
    template = _DETAILS.get(say["id"])
    values = {key: value for key, value in say.items() if key != "id" and (
        isinstance(value, (int, float)) and not isinstance(value, bool)
        or isinstance(value, str) and len(value) <= 40 and value.isprintable())}
    if template is None:
        return english
    try:
        return Text(template.template, **values)
    except (KeyError, IndexError, ValueError, TypeError):
        return english


def _entry(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((c for c in report.get("checks", []) if c["name"] == name), None)


def _cell(entry: dict[str, Any] | None) -> str:
    return "-" if entry is None else ("ok" if entry["ok"] else "FAIL")


def _has_trouble(report: dict[str, Any]) -> bool:
    entries = [_entry(report, name) for name in CHECK_ORDER]
    return bool(report.get("error")) or any(e is None or not e["ok"] for e in entries)


def _summary_cell(cells: list[str]) -> str:
    """``ok`` when every rank's cell is ok, else the counts, e.g. ``ok 13, - 1``."""
    counts = {cell: cells.count(cell) for cell in ("ok", "FAIL", "-") if cell in cells}
    if list(counts) == ["ok"]:
        return "ok"
    return ", ".join(f"{cell} {count}" for cell, count in counts.items())


def _size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def progress_line(report_dir: Path, seconds: float) -> Text:
    """What this node's test ranks are doing, for the status line said every ~10 s while they
    run: each check in progress with the ranks at it, from the stage files they keep."""
    stages = _stages(report_dir)
    if not stages:
        return _("the test's ranks are starting (importing torch, joining the process group): "
                 "{seconds:.0f} s", seconds=seconds)
    at: dict[str, list[int]] = {}
    for rank, stage in sorted(stages.items()):
        at.setdefault(stage, []).append(rank)
    parts = []
    for stage, ranks in sorted(at.items(), key=lambda item: _stage_index(item[0])):
        shown = ", ".join(str(rank) for rank in ranks)
        index = _stage_index(stage)
        if index < len(CHECK_ORDER):
            parts.append(_n("rank {ranks} at check {index} of {total}, {check}",
                            "ranks {ranks} at check {index} of {total}, {check}", len(ranks),
                            ranks=shown, index=index + 1, total=len(CHECK_ORDER), check=stage))
        else:
            parts.append(_n("rank {ranks}: {stage}", "ranks {ranks}: {stage}", len(ranks),
                            ranks=shown, stage=_STAGE_WORDS.get(stage, stage)))
    return _("testing: {ranks}; {seconds:.0f} s so far", ranks=clauses(parts),
             seconds=seconds)


_STAGE_WORDS = {"exchange": _("checks done, gathering every rank's report on node 0"),
                "done": _("finished"), "failed": _("a check failed; reporting it")}


def _stage_index(stage: str) -> int:
    if stage in CHECK_ORDER:
        return CHECK_ORDER.index(stage)
    return len(CHECK_ORDER) + (0 if stage == "failed" else 1 if stage == "exchange" else 2)
