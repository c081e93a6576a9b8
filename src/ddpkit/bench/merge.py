"""Merging the bench jobs' documents into one ``ddpkit.bench/1`` payload, and the recommendation.

Pure: the documents the workers wrote (already read) and how each job ended go in, a JSON-able
dict comes out. The fields ``ddpkit plan --from-bench`` reads (docs/plan.md, "The bench file") are
``model``, ``cluster``, ``inter_node``, ``single_node`` and ``scaling``; the rest is for people.

* **wire rate** (``tcp.wire_bytes_per_s``): for each sender -> receiver pair its best stream count,
  then the slowest pair: what the network gives between any two nodes. Every busbw is divided by it.
* **efficiency** of a setting = the 1-node step of plain DDP measured *in the same job* (seconds
  before, same CPUs, same noise) / the N-node step of the setting, per micro-step, same per-rank
  batch. ``single_node.step_s`` is the median of those references; ``hook_step_s`` adds each hook's
  median in-job overhead to it.
* A setting whose job failed, timed out or whose replicas disagreed is ``ok: false``: shown as
  failed and never recommended.
* A row whose measurement fails its own sanity check (``noisy``: the reference moved, or an
  efficiency no real run can reach) is shown marked and never ranked; the recommendation's
  ``repeat`` says to run again, and why (``thread_cause``: the nodes ran with different threads).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.bench.advice import recommend, sanity, thread_cause
from ddpkit.bench.run import BenchJob, BenchOptions
from ddpkit.bench.strategy_rows import strategies_block
from ddpkit.error_ids import JOB_TIMEOUT
from ddpkit.i18n import _


@dataclass(frozen=True)
class JobOutcome:
    """How one job ended on this node (from the launch layer)."""

    job: BenchJob
    ok: bool
    duration_s: float
    error_id: str | None = None  # job-failed | job-timeout | job-stopped | master-unreachable ...
    message: str | None = None
    stage: str | None = None  # the worker's last stage (scaling jobs), for a hang's "where"
    run_dir: str | None = None
    hint: str | None = None  # the fix, as the error that ended the job gave it
    cause: str | None = None  # the Python exception the ranks died of, where they printed one

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.job.name, "ok": self.ok, "duration_s": round(self.duration_s, 3),
                "timeout_s": self.job.timeout_s, "error_id": self.error_id,
                "message": self.message, "cause": self.cause, "hint": self.hint,
                "stage": self.stage, "run_dir": self.run_dir}


@dataclass(frozen=True)
class ClusterInfo:
    nnodes: int
    nproc_per_node: str
    interface: str
    address: str
    hostname: str


def wire_rate(tcp: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Slowest pair's best rate, and the slowest pair per stream count (bytes/s)."""
    if not tcp or not tcp.get("pairs"):
        return None
    best: dict[tuple[int, int], float] = {}
    per_streams: dict[int, list[float]] = {}
    failed = []
    for row in tcp["pairs"]:
        pair = (int(row["src"]), int(row["dst"]))
        rate = row.get("bytes_per_s")
        if rate is None:
            failed.append(_("node {src} -> node {dst} ({streams} streams): {error}", src=pair[0],
                            dst=pair[1], streams=row["streams"], error=str(row.get("error"))))
            continue
        best[pair] = max(best.get(pair, 0.0), float(rate))
        per_streams.setdefault(int(row["streams"]), []).append(float(rate))
    if not best:
        return {"wire_bytes_per_s": None, "slowest_pair": None, "by_streams": {}, "failed": failed}
    slowest = min(best, key=lambda p: (best[p], p))
    return {"wire_bytes_per_s": best[slowest], "slowest_pair": list(slowest),
            "by_streams": {str(k): min(v) for k, v in sorted(per_streams.items())},
            "failed": failed}


def _collectives(doc: Mapping[str, Any] | None, wire: float | None) -> dict[str, Any] | None:
    if not doc:
        return None
    ops = []
    for entry in doc.get("ops", []):
        rows = [{**r, "busbw_over_tcp": (r["busbw"] / wire) if wire else None}
                for r in entry.get("results", [])]
        ops.append({**entry, "results": rows,
                    "avg_busbw_over_tcp": (entry["avg_busbw"] / wire)
                    if wire and entry.get("avg_busbw") else None})
    return {"backend": doc.get("backend"), "world_size": doc.get("world_size"),
            "dtype": doc.get("dtype"), "warmup_iters": doc.get("warmup_iters"),
            "iters": doc.get("iters"), "ops": ops, "wrong_total": doc.get("wrong_total"),
            "avg_busbw": doc.get("avg_busbw")}


def _inter_node(collectives: Mapping[str, Any] | None, nodes: int,
                wire: float | None) -> dict[str, Any] | None:
    """all_reduce busbw at the largest size: the per-node network rate plan uses."""
    if not collectives or nodes < 2:
        return None
    entry = next((e for e in collectives["ops"] if e["op"] == "all_reduce" and e["results"]), None)
    if entry is None:
        return None
    row = max(entry["results"], key=lambda r: r["bytes"])
    return {"busbw_bytes_per_s": row["busbw"], "op": "all_reduce", "bytes": row["bytes"],
            "busbw_over_tcp": row["busbw"] / wire if wire else None,
            "basis": _("all_reduce busbw at the largest size of the sweep")}


def _failure_text(outcome: JobOutcome | None, doc: Mapping[str, Any] | None) -> str:
    parts = []
    if doc and doc.get("error"):
        parts.append(str(doc["error"]))
    multi = (doc or {}).get("phases", {}).get("all_nodes") or {}
    parts += list(multi.get("problems", []))
    if outcome is not None and not outcome.ok:
        if outcome.error_id == JOB_TIMEOUT:
            parts.append(_("timed out after {seconds:g} s in {stage}",
                           seconds=outcome.job.timeout_s, stage=outcome.stage) if outcome.stage
                         else _("timed out after {seconds:g} s", seconds=outcome.job.timeout_s))
        elif outcome.cause and not parts:
            parts.append(outcome.cause)
        elif outcome.message and not parts:
            parts.append(f"{outcome.error_id}: {outcome.message}")
    if len(parts) == 1:
        return parts[0]
    return "; ".join(parts) or _("no result was written")


def scaling_row(outcome: JobOutcome | None, doc: Mapping[str, Any] | None,
                nodes: int) -> dict[str, Any]:
    """One setting's row: 1-node reference, N-node step, efficiency, ok (and why not)."""
    setting = outcome.job.setting if outcome and outcome.job.setting else str((doc or {})["setting"])
    phases = (doc or {}).get("phases", {})
    reference = (phases.get("one_node", {}).get("none") or {}).get("step_s")
    multi = phases.get("all_nodes")
    ok = bool(doc and doc.get("ok") and (multi or nodes < 2) and (outcome is None or outcome.ok))
    row: dict[str, Any] = {"setting": setting, "nodes": nodes, "ok": ok,
                           "one_node_step_s": reference}
    if ok and multi and reference:
        row.update({
            "step_s": multi["step_s"], "samples_per_s": multi["samples_per_s"],
            "one_node_samples_per_s": multi["batch_per_rank"] * multi["ranks"] / nodes / reference,
            "efficiency": reference / multi["step_s"],
            "throughput_vs_one_node": nodes * reference / multi["step_s"],
            "accumulate": multi["accumulate"], "hook": multi["hook"],
            "implementation": multi["implementation"],
            "timed_micro_steps": multi["timed_micro_steps"],
            "warmup_micro_steps": multi["warmup_micro_steps"], "notes": multi.get("notes", []),
        })
        row.update(sanity(phases["one_node"]["none"], row["efficiency"],
                          multi["ranks"] // max(1, nodes), setting))
    elif nodes >= 2:
        row["error"] = _failure_text(outcome, doc)
    return row


def _single_node(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    references: list[float] = []
    overheads: dict[str, list[float]] = {}
    per_node: list[Any] = []
    for doc in docs:
        one = doc.get("phases", {}).get("one_node", {})
        base = (one.get("none") or {})
        if not base.get("ok") or not base.get("step_s"):
            continue
        references.append(base["step_s"])
        per_node.append(base.get("per_node_step_s", []))
        for label, entry in one.items():
            if label != "none" and entry.get("ok") and entry.get("step_s"):
                overheads.setdefault(label, []).append(entry["step_s"] - base["step_s"])
    if not references:
        return None
    step = statistics.median(references)
    hooks = {label: step + statistics.median(values) for label, values in sorted(overheads.items())}
    return {"step_s": step, "hook_step_s": {k: v for k, v in hooks.items() if v > 0},
            "hook_overhead_s": {k: statistics.median(v) for k, v in sorted(overheads.items())},
            "references_s": references, "per_node_step_s": per_node,
            "basis": _("median over jobs of plain DDP on one node (every node alone, at once)")}


def _socket_sweep(outcomes: Sequence[JobOutcome], docs: Mapping[str, Any],
                  skipped: str | None) -> dict[str, Any] | None:
    jobs = [o for o in outcomes if o.job.kind == "socket"]
    if skipped:
        return {"status": "skipped", "reason": skipped, "results": [], "best": None}
    if not jobs:
        return None
    results: list[dict[str, Any]] = []
    for outcome in jobs:
        doc = docs.get(outcome.job.output)
        rows: list[dict[str, Any]] = next(
            (e["results"] for e in (doc or {}).get("ops", []) if e["op"] == "all_reduce"), [])
        busbw = max((r["busbw"] for r in rows), default=None)
        threads, socks = outcome.job.socket or (None, None)
        results.append({"nthreads": threads, "nsocks_perthread": socks, "busbw": busbw,
                        "ok": outcome.ok and busbw is not None and not (doc or {}).get("wrong_total"),
                        "error": None if outcome.ok else outcome.message})
    default = next((r for r in results if r["nthreads"] is None), None)
    tuned = [r for r in results if r["ok"] and r["nthreads"] is not None]
    best = max(tuned, key=lambda r: (r["busbw"], -r["nthreads"] * r["nsocks_perthread"]),
               default=None)
    pick = None
    if best is not None:
        gain = best["busbw"] / default["busbw"] if default and default["ok"] else None
        env = f"NCCL_SOCKET_NTHREADS={best['nthreads']} NCCL_NSOCKS_PERTHREAD={best['nsocks_perthread']}"
        pick = {**best, "vs_default": gain, "command": f"ddpkit nccl-conf set {env}",
                "worth_it": gain is None or gain >= 1.05}
    return {"status": "done", "reason": None, "results": results, "best": pick}


def build_payload(options: BenchOptions, cluster: ClusterInfo, outcomes: Sequence[JobOutcome],
                  docs: Mapping[str, Any], notes: Sequence[str] = (),
                  socket_skipped: str | None = None) -> dict[str, Any]:
    """The ``ddpkit.bench/1`` payload (without ``schema``; :func:`ddpkit.report.document` adds it).

    ``docs`` maps a job's output file name to the document its rank 0 wrote (absent: none).
    """
    tcp_doc = docs.get("tcp.json")
    wire = wire_rate(tcp_doc)
    wire_rate_value = wire["wire_bytes_per_s"] if wire else None
    collectives = _collectives(docs.get("collectives.json"), wire_rate_value)
    scaling_outcomes = [o for o in outcomes if o.job.kind == "scaling"]
    scaling_docs = [docs[o.job.output] for o in scaling_outcomes if docs.get(o.job.output)]
    first = scaling_docs[0] if scaling_docs else {}
    nodes = int(first.get("nodes") or cluster.nnodes)
    rows = [scaling_row(o, docs.get(o.job.output), nodes) for o in scaling_outcomes]
    backend = first.get("backend") or (collectives or {}).get("backend") or (
        options.backend if options.backend != "auto" else None)  # None: no worker said
    local = (collectives or {}).get("world_size")
    gpus_per_node = (first.get("ranks_per_node") or [None])[0] or (
        local // nodes if isinstance(local, int) and nodes else None) or (
        int(cluster.nproc_per_node) if cluster.nproc_per_node.isdigit() else None)
    device = first.get("device") or ({"nccl": "cuda", "gloo": "cpu"}.get(backend or ""))
    payload: dict[str, Any] = {
        "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node, "backend": backend,
                    "device": device,
                    "interface": cluster.interface, "address": cluster.address,
                    "master_host": cluster.hostname,
                    "torch_version": first.get("torch_version")},
        "model": first.get("model"),
        "tcp": ({**tcp_doc, **(wire or {})} if tcp_doc else None),
        "collectives": collectives,
        "inter_node": _inter_node(collectives, nodes, wire_rate_value),
        "single_node": _single_node(scaling_docs),
        "scaling": [r for r in rows if nodes >= 2],
        "recommendation": (recommend(rows, nodes=nodes, threshold=options.efficiency_threshold,
                                     cause=thread_cause(scaling_docs))
                           if options.scaling else None),
        "socket_sweep": _socket_sweep(outcomes, docs, socket_skipped),
        "notes": list(notes),
        "jobs": [o.to_dict() for o in outcomes],
    }
    payload["strategies"] = strategies_block(outcomes, docs, payload["inter_node"],
                                             wire_rate_value, device)
    payload["ok"] = bench_ok(payload, outcomes)
    return {k: v for k, v in payload.items() if v is not None}


def bench_ok(payload: Mapping[str, Any], outcomes: Sequence[JobOutcome]) -> bool:
    """False when a measurement job failed, an element was wrong, or plain DDP did not run.

    A reduction that failed is a finding (reported, never recommended), not a bench failure.
    """
    if any(not o.ok for o in outcomes if o.job.kind in ("net", "tcp")):
        return False
    if (payload.get("collectives") or {}).get("wrong_total"):
        return False
    plain = next((r for r in payload.get("scaling") or [] if r["setting"] == "none"), None)
    if plain is not None and not plain["ok"]:
        return False
    scaling = [o for o in outcomes if o.job.kind == "scaling"]
    return not (scaling and payload.get("single_node") is None)
