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
    """A cluster report from its JSON form, in the words of the per-node view."""
    render.line(console, _n("ddpkit doctor: cluster of {count} node, master {address}",
                            "ddpkit doctor: cluster of {count} nodes, master {address}",
                            int(doc.get("nnodes") or 0),
                            address=doc.get("master", {}).get("address")))
    rows: list[tuple[str, str, str]] = [
        (f"node{n['rank']}", str(n["hostname"]),
         ", ".join(f"{c['ifname']} {c['address']}" for c in n.get("candidates", [])) or _("none"))
        for n in doc.get("nodes", [])]
    rows += [(f"node{rank}", _("(did not show up)"), "") for rank in doc.get("missing", [])]
    render.table(console, (_("node"), _("hostname"), _("candidate interfaces")), sorted(rows),
                 title=_("nodes"))
    for problem in doc.get("problems", []):
        # message and fix are node 0's report (a JSON document): English as sent
        severity = _SEVERITY.get(str(problem.get("severity", "")), str(problem.get("severity", "")))
        render.line(console, _("{severity:<8} {id}: {message}", severity=severity,
                               id=problem.get("id"), message=problem.get("message")))
        render.line(console, _("  fix: {fix}", fix=problem.get("fix")))
    choices = doc.get("verdict", {}).get("interfaces", [])
    if choices:
        render.line(console, _("verdict: {choices}", choices="; ".join(
            f"node{c['rank']}: {c['interface']} {c['address']}" for c in choices)))
    else:
        render.line(console, _("verdict: no interface assignment reaches every node"))
