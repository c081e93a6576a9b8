"""Pure: what the meeting gathered -> the cluster report (matrix, diff, verdict, problems).

Every node builds the same report from the same records, so every node prints the same verdict.
``to_dict`` is the payload of the ``ddpkit.doctor-cluster/1`` document; ``matrix_table`` and
``difference_table`` give the rows the CLI renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddpkit.doctor.cluster import problems as found
from ddpkit.doctor.cluster.fingerprint import Difference, diff
from ddpkit.doctor.cluster.matrix import CELL, Matrix, complete_matrix
from ddpkit.doctor.cluster.model import NodeRecord, ProbeReport
from ddpkit.doctor.cluster.problems import Problem
from ddpkit.doctor.cluster.summary import SCALE_NODES, compact_ranks, probe_figures
from ddpkit.doctor.cluster.verdict import Verdict, decide
from ddpkit.i18n import _

SCHEMA_KIND, SCHEMA_VERSION = "doctor-cluster", 1
SIDE_BY_SIDE_MAX = 6  # nodes shown in their own columns; more are grouped by value
MATRIX_COLUMNS_MAX = 8  # node interfaces shown as matrix columns; more: one row per node pair


@dataclass(frozen=True)
class MeetingOutcome:
    """What this node gathered from the meeting store (the session's output, the report's input)."""

    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int
    timeout_s: float  # how long nodes were given to show up
    records: tuple[NodeRecord, ...]  # the nodes that showed up
    probe_reports: tuple[ProbeReport, ...] = ()
    duplicates: tuple[tuple[int, str], ...] = ()  # (rank, hostname) of nodes refused a taken rank
    elapsed_s: float = 0.0  # this node's time from start to the last result
    met_after_s: float | None = None  # when every node had shown up (None: some never did)

    @property
    def master(self) -> str:
        host = f"[{self.master_addr}]" if ":" in self.master_addr else self.master_addr
        return f"{host}:{self.master_port}"


@dataclass(frozen=True)
class ClusterReport:
    outcome: MeetingOutcome
    matrix: Matrix
    differences: tuple[Difference, ...]
    verdict: Verdict
    problems: tuple[Problem, ...] = field(default=())

    @property
    def records(self) -> tuple[NodeRecord, ...]:
        return self.outcome.records

    @property
    def missing(self) -> tuple[int, ...]:
        present = {r.rank for r in self.records}
        return tuple(r for r in range(self.outcome.nnodes) if r not in present)

    @property
    def ok(self) -> bool:
        """Every node reaches every other and nothing error-level differs."""
        return self.verdict.ok and not any(p.severity == "error" for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        out = self.outcome
        return {
            "ok": self.ok,
            "nnodes": out.nnodes,
            "node_rank": out.node_rank,
            "master": {"address": out.master_addr, "port": out.master_port},
            "timing": {"elapsed_s": round(out.elapsed_s, 3),
                       "all_present_after_s": None if out.met_after_s is None
                       else round(out.met_after_s, 3), "timeout_s": out.timeout_s},
            "nodes": [{"rank": r.rank, "hostname": r.hostname,
                       "candidates": [c.to_dict() for c in r.candidates],
                       "fingerprint": r.fingerprint.to_dict()} for r in self.records],
            "missing": list(self.missing),
            "paths": [p.to_dict() for p in self.matrix.results()],
            "probes": probe_figures(self.matrix, self.records),
            "differences": [d.to_dict() for d in self.differences],
            "verdict": self.verdict.to_dict(),
            "problems": [p.to_dict() for p in self.problems],
        }


def build_report(outcome: MeetingOutcome) -> ClusterReport:
    records = tuple(sorted(outcome.records, key=lambda r: r.rank))
    outcome = MeetingOutcome(**{**outcome.__dict__, "records": records})
    reports = {p.rank: p for p in outcome.probe_reports}
    present = [r.rank for r in records]
    missing = [r for r in range(outcome.nnodes) if r not in present]
    results = [result for p in outcome.probe_reports for result in p.results]
    matrix = complete_matrix(records, results) if not missing else Matrix(results)
    differences = diff({r.rank: r.fingerprint for r in records})
    verdict = decide(records, matrix, outcome.nnodes, outcome.master_port)
    problems: list[Problem] = []
    if missing:
        problems.append(found.missing_problem(missing, outcome.nnodes, outcome.master,
                                              outcome.timeout_s, present))
    duplicates: dict[int, list[str]] = {}
    for rank, hostname in outcome.duplicates:
        duplicates.setdefault(rank, []).append(hostname)
    for rank, hostnames in sorted(duplicates.items()):
        holder = next((r.hostname for r in records if r.rank == rank), "?")
        problems.append(found.duplicate_problem(rank, [holder, *hostnames]))
    problems += found.silent_problems(records, reports, bool(missing))
    if not missing:
        problems += found.reachability_problems(records, matrix, verdict)
        problems += found.trap_problems(records, matrix)
    problems += found.setting_problems(records, verdict)
    problems += found.difference_problems(differences)
    return ClusterReport(outcome, matrix, differences, verdict, found.ordered(problems))


def node_label(record: NodeRecord) -> str:
    return f"node{record.rank}"


def matrix_table(report: ClusterReport) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Rows: (from node, interface); columns: to node:interface; cells: ok or why not.

    With more than ``MATRIX_COLUMNS_MAX`` columns it would not fit a terminal: then one row per
    pair of nodes, with the interface pairs that work (or the first that failed).
    """
    records = report.records
    columns = [(r, c) for r in records for c in r.candidates]
    if len(columns) > MATRIX_COLUMNS_MAX:
        return pair_table(report)
    headers = (_("from"), _("via"), *(f"n{r.rank}:{c.ifname}" for r, c in columns))
    rows = []
    for record in records:
        for candidate in record.candidates:
            cells = []
            for peer, target in columns:
                if peer.rank == record.rank:
                    cells.append("-")
                    continue
                path = report.matrix.get(record.rank, candidate.ifname, peer.rank, target.ifname)
                cells.append("n/a" if path is None else CELL[path.status])
            rows.append((node_label(record), candidate.ifname, *cells))
    return headers, rows


def pair_table(report: ClusterReport) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """One row per ordered pair of nodes: the interface pairs that work, else the first failure."""
    rows: list[tuple[str, ...]] = []
    for record in report.records:
        for peer in report.records:
            if peer.rank == record.rank:
                continue
            working: list[str] = []
            failed: list[tuple[bool, str]] = []  # same-name pairs first: the likelier intent
            for a in record.candidates:
                for b in peer.candidates:
                    path = report.matrix.get(record.rank, a.ifname, peer.rank, b.ifname)
                    if path is None:
                        continue
                    if path.ok:
                        working.append(f"{a.ifname}->{b.ifname}")
                    else:
                        failed.append((a.ifname != b.ifname,
                                       f"{a.ifname}->{b.ifname} {CELL[path.status]}"))
            worst = [text for _, text in sorted(failed, key=lambda f: f[0])[:2]]
            shown = ", ".join(working) if working else _("none ({failed})",
                                                          failed=", ".join(worst))
            rows.append((node_label(record), node_label(peer), shown))
    return (_("from"), _("to"), _("working interface pairs")), rows


def difference_table(report: ClusterReport) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Differences side by side (one column per node), or grouped by value for many nodes."""
    ranks = [r.rank for r in report.records]
    if len(ranks) <= SIDE_BY_SIDE_MAX:
        headers = (_("what"), _("severity"), *(f"node{r}" for r in ranks))
        rows = [(d.field, d.severity, *(dict(d.values).get(r, "") for r in ranks))
                for d in report.differences]
        return headers, rows
    from ddpkit.doctor.cluster.fingerprint import describe_groups

    return ((_("what"), _("severity"), _("values")),
            [(d.field, d.severity, describe_groups(dict(d.values))) for d in report.differences])


def verdict_lines(verdict: Verdict) -> list[str]:
    """The verdict in words and the exact lines to run, node by node (past ``SCALE_NODES`` nodes
    that all use one interface name: node 0's and node 1's lines, the others follow the pattern)."""
    if not verdict.ok:
        return [_("no interface assignment reaches every node: see the problems above")]
    lines: list[str] = []
    same = verdict.same_name
    commands = verdict.commands()
    if same is not None and len(commands) > SCALE_NODES:
        ranks = [choice.rank for choice in verdict.choices]
        lines.append(_("{nodes}: {name}, node0 at {address}", nodes=compact_ranks(ranks),
                       name=same, address=verdict.choices[0].address))
        lines.append("")
        lines.append(_("every node uses {name}; persist it once per node:", name=same))
        lines.append(f"  {commands[0].nccl_conf}")
        lines.append(_("then launch (train.py stands for your script; node I: --node-rank I):"))
        lines += [f"  node{c.rank}: {c.launch}" for c in commands[:2]]
        return lines
    for choice in verdict.choices:
        lines.append(f"node{choice.rank}: {choice.ifname} {choice.address}")
    lines.append("")
    if same is not None:
        lines.append(_("every node uses {name}; persist it once per node:", name=same))
        lines.append(f"  {commands[0].nccl_conf}")
    else:
        lines.append(_("the interface names differ per node; persist each node's own:"))
        lines += [f"  node{c.rank}: {c.nccl_conf}" for c in commands]
    lines.append(_("then launch (train.py stands for your script):"))
    lines += [f"  node{c.rank}: {c.launch}" for c in commands]
    return lines


def summary_line(report: ClusterReport) -> str:
    errors = sum(p.severity == "error" for p in report.problems)
    warnings = sum(p.severity == "warning" for p in report.problems)
    values = dict(seen=len(report.records), nnodes=report.outcome.nnodes, errors=errors,
                  warnings=warnings, elapsed=report.outcome.elapsed_s)
    if report.ok:
        return _("doctor: cluster ok: {seen} of {nnodes} nodes, {errors} error(s), {warnings} "
                 "warning(s) in {elapsed:.1f} s", **values)
    return _("doctor: cluster FAILED: {seen} of {nnodes} nodes, {errors} error(s), {warnings} "
             "warning(s) in {elapsed:.1f} s", **values)
