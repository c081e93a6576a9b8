"""`ddpkit doctor`'s cluster check as a whole job from the master (over ssh or with a join token,
:mod:`ddpkit.cli.job.whole_job`): the flags every node repeats, and the report.

Every node runs ``ddpkit doctor --nnodes N --node-rank R --master-addr A --timeout T`` (the job's
``node_argv``), they meet on the master port as in per-node cluster mode, and the machine the job
was started on shows node 0's report: the nodes, the problems, and the interface every node should
use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import ExitCode
from ddpkit.i18n import _, _n
from ddpkit.launch.outcomes import NodeOutcome, job_summary

CHECK_FAILED = "checks-failed"  # a node's report says not ok: the check's answer, not a crash
_SEVERITY = {"error": _("error"), "warning": _("warning"), "note": _("note"), "info": _("info")}


def tail(timeout_s: float) -> list[str]:
    return ["--timeout", f"{timeout_s:g}"]


def render_job(console: Console, outcomes: Sequence[NodeOutcome], payload: dict[str, Any], *,
               as_json: bool) -> int:
    """Node 0's cluster report (it holds every node's view), then how the job went."""
    from ddpkit.report import document

    doc = next((o.document for o in outcomes if o.node_rank == 0 and o.document
                and "verdict" in o.document), None)
    crashed = [o for o in outcomes if o.state != "ok" and o.error_id != CHECK_FAILED]
    if as_json:
        body = {k: v for k, v in (doc or {}).items() if k not in ("schema", "ddpkit_version")}
        body["job"] = payload
        render.emit_json(console, document("doctor-cluster", 1, body))
    elif doc is not None:
        show_report(console, dict(doc))
    if crashed:
        render.status(console, _("job failed: {summary}", summary=job_summary(outcomes)), keep=True)
        return int(ExitCode.JOB_FAILED)
    return int(ExitCode.OK if doc is not None and doc.get("ok") else ExitCode.FAILURE)


def show_report(console: Console, doc: dict[str, Any]) -> None:
    """A cluster report from its JSON form, in the words of the per-node view; past
    ``SCALE_NODES`` nodes by exception (``doctor/cluster/summary.py``), every path in --json."""
    from ddpkit.doctor.cluster.summary import SCALE_NODES, compact_ranks, probe_line, shown_problems

    render.line(console, _n("ddpkit doctor: cluster of {count} node, master {address}",
                            "ddpkit doctor: cluster of {count} nodes, master {address}",
                            int(doc.get("nnodes") or 0),
                            address=doc.get("master", {}).get("address")))
    nodes = [n for n in doc.get("nodes", []) if isinstance(n, dict)]
    at_scale = len(nodes) > SCALE_NODES
    if at_scale:
        _show_at_scale(console, doc, nodes)
    else:
        rows: list[tuple[str, str, str]] = [
            (f"node{n['rank']}", str(n["hostname"]),
             ", ".join(f"{c['ifname']} {c['address']}" for c in n.get("candidates", []))
             or _("none")) for n in nodes]
        rows += [(f"node{rank}", _("(did not show up)"), "") for rank in doc.get("missing", [])]
        render.table(console, (_("node"), _("hostname"), _("candidate interfaces")), sorted(rows),
                     title=_("nodes"))
    if isinstance(doc.get("probes"), dict):
        render.wrapped(console, probe_line(doc["probes"]), first="", indent="  ")
    problems = [p for p in doc.get("problems", []) if isinstance(p, dict)]
    indexes, more = (shown_problems([str(p.get("id")) for p in problems]) if at_scale
                     else (list(range(len(problems))), {}))
    for problem in (problems[i] for i in indexes):
        # message and fix are node 0's report (a JSON document): English as sent
        severity = _SEVERITY.get(str(problem.get("severity", "")), str(problem.get("severity", "")))
        render.wrapped(console, _("{severity:<8} {id}: {message}", severity=severity,
                                  id=problem.get("id"), message=problem.get("message")), first="")
        render.wrapped(console, _("  fix: {fix}", fix=problem.get("fix")), first="")
    for problem_id, count in sorted(more.items()):
        render.wrapped(console, _n("... and {count} more {id} problem (every one in --json)",
                                   "... and {count} more {id} problems (every one in --json)",
                                   count, id=problem_id), first="")
    choices = [c for c in doc.get("verdict", {}).get("interfaces", []) if isinstance(c, dict)]
    names = {str(c.get("interface")) for c in choices}
    if choices and at_scale and len(names) == 1:
        render.wrapped(console, _("verdict: {nodes}: {name} (node0 {address}; every address in "
                                  "--json)", nodes=compact_ranks(int(c["rank"]) for c in choices),
                                  name=names.pop(), address=choices[0].get("address")), first="")
    elif choices:
        render.wrapped(console, _("verdict: {choices}", choices="; ".join(
            f"node{c['rank']}: {c['interface']} {c['address']}" for c in choices)), first="")
    else:
        render.line(console, _("verdict: no interface assignment reaches every node"))


def _show_at_scale(console: Console, doc: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
    from ddpkit.doctor.cluster.model import PathResult
    from ddpkit.doctor.cluster.summary import compact_ranks, node_groups, reach_rows

    groups = node_groups((int(n["rank"]), [str(c.get("ifname")) for c in n.get("candidates", [])])
                         for n in nodes)
    missing = [int(rank) for rank in doc.get("missing", [])]
    if missing:
        groups.append((compact_ranks(missing), _("(did not show up)")))
    render.table(console, (_("nodes"), _("candidate interfaces")), groups,
                 title=_("nodes, grouped by interface names (addresses: --json)"))
    paths = []
    for item in doc.get("paths", []):
        try:
            paths.append(PathResult.from_dict(item))
        except (ValueError, KeyError, TypeError):
            continue  # a node's report is read, never trusted: a bad path is left out
    if paths:
        render.table(console, (_("interfaces"), _("from nodes"), _("result")), reach_rows(paths),
                     title=_("reachability, nodes with the same result on one row (every path: "
                             "--json)"))
