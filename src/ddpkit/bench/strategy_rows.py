"""The bench's DDP / FSDP / HSDP rows beside `ddpkit plan`'s prediction for the same run.

Pure: the ``ddpkit.strategy-run/1`` documents (``ddpkit.workers.strategies``), how their jobs ended
and the link the bench measured go in; the ``strategies`` block of ``ddpkit.bench/1`` comes out.

The prediction is plan's own model (:mod:`ddpkit.bench.planning.strategies` and
:mod:`ddpkit.bench.planning.memory`) for the model, nodes and ranks per node that ran:

* link: the measured inter-node all_reduce busbw (what ``plan --from-bench`` reads), else the raw
  TCP wire rate; intra-node plan's default; overlap plan's (0 for a CPU run, else 0.7); the
  ``hierarchical`` all-reduce model, plan's default, and the collectives counted as the run's
  backend runs them (Gloo: one ring for all-reduce, a whole all-reduce for reduce-scatter);
* compute: solved from the strategy's own measured 1-node step (the step = compute + exposed
  1-node communication, as plan models it), so the comparison checks the inter-node traffic terms,
  not a guess of the compute;
* memory: parameters + gradients + optimizer state per rank (Adam, fp32, one FSDP unit per layer),
  against the bytes of those tensors on the largest rank; plan's model state (with DDP's buckets or
  FSDP's working set) beside the peak resident memory.

Ratios are measured / predicted. ``step_s_at_measured_bytes`` is plan's step with the bytes the
link really carried in place of its traffic count (Gloo runs DDP's all-reduce as one ring over all
ranks and FSDP's reduce-scatter as a whole all-reduce: docs/bench.md), so the two ratios tell a
counting error from a timing one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ddpkit.bench.planning.memory import MemoryInput, Strategy, memory
from ddpkit.bench.planning.plan import CPU_OVERLAP, DEFAULT_INTRA_NODE, DEFAULT_OVERLAP
from ddpkit.bench.planning.strategies import Link, evaluate_strategies, exposed_comm, traffic
from ddpkit.bench.run import BENCH_STRATEGIES
from ddpkit.choices import parse_choice
from ddpkit.error_ids import JOB_TIMEOUT
from ddpkit.i18n import _


class _Outcome(Protocol):  # ddpkit.bench.merge.JobOutcome (merge imports this module)
    @property
    def ok(self) -> bool: ...
    @property
    def error_id(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...
    @property
    def cause(self) -> str | None: ...
    @property
    def stage(self) -> str | None: ...
    @property
    def job(self) -> Any: ...


def compute_from_step(one_node_step_s: float, exposed: Callable[[float], float]) -> float:
    """The compute time for which plan's step (``compute + exposed(compute)``) equals a measured
    step."""
    low, high = 0.0, one_node_step_s
    for _step in range(200):
        middle = (low + high) / 2
        step = middle + exposed(middle)
        low, high = (middle, high) if step < one_node_step_s else (low, middle)
    return (low + high) / 2


def intra_node_rate(doc: Mapping[str, Any]) -> float | None:
    """The node's own all-reduce busbw the worker measured in the one-node phases (bytes/s; the
    mean of their times), None if it did not."""
    phases, ranks = doc.get("phases", {}), int(doc.get("ranks_per_node") or 0)
    runs = [p["intra_allreduce"] for k in ("one_node", "one_node_again")
            if (p := phases.get(k)) and p.get("intra_allreduce")]
    if not runs or ranks < 2:
        return None
    seconds = sum(r["seconds"] for r in runs) / len(runs)
    return 2 * (ranks - 1) / ranks * runs[0]["bytes"] / seconds if seconds > 0 else None


def run_input(params: int, width: int, depth: int, nodes: int, ranks_per_node: int) -> MemoryInput:
    """The worker's MLP (fp32, Adam, one FSDP unit per layer) as plan's input."""
    return MemoryInput(params=params, nodes=nodes, gpus_per_node=ranks_per_node, grad_bytes=4,
                       optimizer="adam", layers=depth, hidden=width)


def predict(strategy: Strategy, *, params: int, width: int, depth: int, nodes: int,
            ranks_per_node: int, one_node_step_s: float | None, link: Link) -> dict[str, Any]:
    """Plan's step time, traffic and memory per rank for ``strategy`` on this run's layout."""
    inp = run_input(params, width, depth, nodes, ranks_per_node)
    one = replace(inp, nodes=1)
    _, comm_one = traffic(inp, strategy, link, 1)
    compute = (None if one_node_step_s is None else compute_from_step(
        one_node_step_s, lambda c: exposed_comm(one, strategy, link, comm_one, c)))
    result = next(r for r in evaluate_strategies(inp, link, compute, None)
                  if r.strategy == strategy)
    mem = memory(inp, strategy)
    return {"compute_s": compute, "comm_s": result.comm_s, "one_node_comm_s": comm_one,
            "exposed_comm_s": None if compute is None else exposed_comm(
                inp, strategy, link, result.comm_s, compute),
            "one_node_exposed_comm_s": None if compute is None else exposed_comm(
                one, strategy, link, comm_one, compute),
            "intra_node_bytes_per_s": link.intra_node,
            "step_s": result.step_s, "link_bytes_per_step": result.inter_node_bytes,
            "state_bytes": mem.weights + mem.gradients + mem.optimizer,
            "model_state_bytes": mem.model_states, "shard_group": mem.shard_group}


def _ratio(measured: float | None, predicted: float | None) -> float | None:
    return measured / predicted if measured is not None and predicted else None


def _failure(outcome: _Outcome | None, doc: Mapping[str, Any] | None) -> str:
    if doc and doc.get("error"):
        return str(doc["error"])
    problems = [p for phase in (doc or {}).get("phases", {}).values()
                for p in phase.get("problems", [])]
    if problems:
        return "; ".join(problems)
    if outcome is not None and not outcome.ok:
        if outcome.error_id == JOB_TIMEOUT:
            return (_("timed out after {seconds:g} s in {stage}", seconds=outcome.job.timeout_s,
                      stage=outcome.stage) if outcome.stage else
                    _("timed out after {seconds:g} s", seconds=outcome.job.timeout_s))
        return outcome.cause or f"{outcome.error_id}: {outcome.message}"
    return _("no result was written")


def _link_bytes(phase: Mapping[str, Any]) -> float | None:
    """The busiest node's bytes per step, the larger direction (plan counts one direction)."""
    counts = [max(n["rx_bytes_per_step"], n["tx_bytes_per_step"]) for n in phase.get("link", [])]
    return max(counts) if counts else None


def strategy_row(strategy: str, outcome: _Outcome | None, doc: Mapping[str, Any] | None,
                 link: Link | None) -> dict[str, Any]:
    phases = (doc or {}).get("phases", {})
    one, multi, again = (phases.get(k) for k in ("one_node", "all_nodes", "one_node_again"))
    nodes = int((doc or {}).get("nodes") or 0)
    ok = bool(doc and doc.get("ok") and (multi or nodes == 1) and (outcome is None or outcome.ok))
    row: dict[str, Any] = {"strategy": strategy, "ok": ok}
    if not ok:
        row["error"] = _failure(outcome, doc)
    if not doc or not one:
        return row
    model, ranks = doc["model"], int(doc["ranks_per_node"])
    ran = multi or one
    if multi and multi.get("one_node_step_s"):  # alternated with the all-nodes steps
        reference = multi["one_node_step_s"]
        references = [one["step_s"], reference]
    else:  # an older worker's phases before and after, or one node only
        references = [p["step_s"] for p in (one, again) if p]
        reference = sum(references) / len(references)
    measured = {"one_node_step_s": reference, "one_node_steps_s": references,
                "step_s": ran["step_s"], "optimizer_s": ran.get("optimizer_s"),
                "one_node_optimizer_s": (multi or {}).get("one_node_optimizer_s"),
                "state_bytes": ran["state_bytes"], "peak_rss_delta": ran["peak_rss_delta"],
                "cuda_peak": ran["cuda_peak"],
                "link_bytes_per_step": _link_bytes(multi) if multi else None}
    row.update(nodes=nodes, ranks_per_node=ranks, model=model, measured=measured)
    if link is None:
        return row
    measured_intra = intra_node_rate(doc)
    if measured_intra is not None:  # the node's own ranks, measured under this job's load
        link = replace(link, intra_node=measured_intra)
    name = parse_choice(strategy, BENCH_STRATEGIES, "strategy")
    predicted = predict(name,
                        params=int(model["params"]),
                        width=int(model["width"]), depth=int(model["depth"]), nodes=nodes,
                        ranks_per_node=ranks, one_node_step_s=reference, link=link)
    moved, compute = measured["link_bytes_per_step"], predicted["compute_s"]
    if moved is not None and compute is not None:
        # plan's time with the bytes the link really carried in place of its traffic count: what
        # is left of the error is timing (bandwidth, overlap, compute), not counting
        comm = predicted["comm_s"] + (moved - predicted["link_bytes_per_step"]) / link.inter_node
        inp = run_input(int(model["params"]), int(model["width"]), int(model["depth"]), nodes,
                        ranks)
        predicted["step_s_at_measured_bytes"] = compute + exposed_comm(inp, name, link, comm,
                                                                       compute)
        hidden = compute + comm - measured["step_s"]
        # the overlap that would make plan's step (at the measured bytes) the measured one: 0
        # nothing hidden, 1 all of it; outside 0..1 the step moved for other reasons (noise)
        measured["implied_overlap"] = (hidden / min(comm, compute)
                                       if multi and min(comm, compute) > 0 else None)
    row["predicted"] = predicted
    row["ratio"] = {"step": _ratio(measured["step_s"], predicted["step_s"]) if multi else None,
                    "state": _ratio(measured["state_bytes"], predicted["state_bytes"]),
                    "link_bytes": _ratio(measured["link_bytes_per_step"],
                                         predicted["link_bytes_per_step"]),
                    "step_at_measured_bytes": _ratio(measured["step_s"],
                                                     predicted.get("step_s_at_measured_bytes"))}
    return row


def link_for(ran: Sequence[Mapping[str, Any]], inter_node: Mapping[str, Any] | None,
             wire_bytes_per_s: float | None, device: str | None) -> Link | None:
    """The link plan is given for the strategy jobs' documents ``ran``: the measured inter-node
    all_reduce busbw, else the raw TCP wire rate (None: neither was measured)."""
    device = next((str(d["device"]) for d in ran if d.get("device")), device)
    overlap = CPU_OVERLAP if device == "cpu" else DEFAULT_OVERLAP
    if inter_node and inter_node.get("busbw_bytes_per_s"):
        rate = float(inter_node["busbw_bytes_per_s"])
    elif wire_bytes_per_s:
        rate = float(wire_bytes_per_s)
    else:
        return None
    backend = next((str(d["backend"]) for d in ran if d.get("backend")), "nccl")
    return Link(rate, DEFAULT_INTRA_NODE, overlap, backend=backend)


def strategies_block(outcomes: Sequence[_Outcome], docs: Mapping[str, Any],
                     inter_node: Mapping[str, Any] | None, wire_bytes_per_s: float | None,
                     device: str | None) -> dict[str, Any] | None:
    """The ``strategies`` block: the link plan was given and one row per strategy job."""
    jobs = [o for o in outcomes if o.job.kind == "strategy"]
    if not jobs:
        return None
    ran = [docs.get(o.job.output) or {} for o in jobs]
    link = link_for(ran, inter_node, wire_bytes_per_s, device)
    notes = []
    if inter_node and inter_node.get("busbw_bytes_per_s"):
        basis: str | None = _("all_reduce busbw (collective sweep)")
    elif wire_bytes_per_s:
        basis = _("raw TCP wire rate")
    else:
        basis = None
        notes.append(_("no inter-node rate was measured: add --collectives (or --tcp) for plan's "
                       "prediction"))
    order = {s: i for i, s in enumerate(BENCH_STRATEGIES)}
    rows = [strategy_row(str(o.job.strategy), o, docs.get(o.job.output), link)
            for o in sorted(jobs, key=lambda o: order.get(o.job.strategy, len(order)))]
    return {"link": None if link is None else {
                "inter_node_bytes_per_s": link.inter_node, "basis": basis,
                "intra_node_bytes_per_s": link.intra_node, "overlap": link.overlap,
                "algorithm": link.algorithm, "backend": link.backend},
            "rows": rows, "notes": notes}
