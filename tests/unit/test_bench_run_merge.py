"""Merging the bench jobs' documents: wire rate, busbw ratios, efficiency, failures, the advice,
and the plan-readable fields (checked by feeding the result to ``ddpkit plan``'s own reader)."""

from __future__ import annotations

from typing import Any

import pytest

from ddpkit.bench import report
from ddpkit.bench.merge import (
    ClusterInfo,
    JobOutcome,
    build_payload,
    recommend,
    scaling_row,
    wire_rate,
)
from ddpkit.bench.planning.bench_results import parse_bench
from ddpkit.bench.planning.plan import PlanRequest, make_plan
from ddpkit.bench.plot import plot_data
from ddpkit.bench.run import BenchOptions, plan_jobs
from ddpkit.report import document

CLUSTER = ClusterInfo(nnodes=2, nproc_per_node="1", interface="eth1", address="10.0.0.2",
                      hostname="node0")
MB = 1e6


def tcp_doc(rates: dict[tuple[int, int, int], float | None]) -> dict[str, Any]:
    pairs = [{"src": s, "dst": d, "streams": n, "bytes": int((r or 0) * 2), "seconds": 2.0,
              "bytes_per_s": r, "error": None if r else "cannot connect: refused"}
             for (s, d, n), r in sorted(rates.items())]
    return {"schema": "ddpkit.tcp-baseline/1", "seconds": 2.0, "streams": [1, 4],
            "nodes": [{"node": 0, "host": "node0", "ifname": "eth1", "address": "10.0.0.2",
                       "speed_mbps": 10000},
                      {"node": 1, "host": "node1", "ifname": "eth1", "address": "10.0.0.3",
                       "speed_mbps": None}],
            "pairs": pairs, "note": None}


def collectives_doc(busbw: dict[int, float], wrong: int = 0) -> dict[str, Any]:
    rows = [{"bytes": size, "count": size // 4, "dtype": "float", "time_us": size / bw * 1e6,
             "algbw": bw, "busbw": bw, "wrong": wrong if size == max(busbw) else 0}
            for size, bw in sorted(busbw.items())]
    return {"schema": "ddpkit.collectives/1", "backend": "gloo", "world_size": 2, "dtype": "float32",
            "warmup_iters": 2, "iters": 5, "wrong_total": wrong,
            "avg_busbw": sum(busbw.values()) / len(busbw),
            "ops": [{"op": "all_reduce", "supported": True, "note": None, "busbw_factor": 1.0,
                     "avg_busbw": sum(busbw.values()) / len(busbw), "results": rows},
                    {"op": "reduce_scatter", "supported": False, "note": "RuntimeError: nope",
                     "busbw_factor": 0.5, "results": []}]}


def scaling_doc(setting: str, one: float, multi: float | None, *, hook_one: float | None = None,
                ok: bool = True, error: str | None = None) -> dict[str, Any]:
    entry = {"step_s": one, "per_node_step_s": [one, one], "ok": True, "problems": []}
    phases: dict[str, Any] = {"one_node": {"none": entry}}
    hook = setting.split("+")[0] if setting.split("+")[0] not in ("none",) and \
        not setting.startswith("accumulate") else None
    if hook and hook_one is not None:
        phases["one_node"][hook] = {**entry, "step_s": hook_one}
    if multi is not None:
        accumulate = int(setting.split("accumulate:")[1]) if "accumulate:" in setting else 1
        phases["all_nodes"] = {"step_s": multi, "samples_per_s": 2 * 64 / multi, "ranks": 2,
                               "batch_per_rank": 64, "accumulate": accumulate, "hook": hook or "none",
                               "implementation": "x", "timed_micro_steps": 12,
                               "warmup_micro_steps": 4, "notes": [], "ok": ok,
                               "problems": [] if ok else ["replicas ended with different parameters"]}
    doc = {"schema": "ddpkit.scaling-run/1", "setting": setting, "ok": ok and error is None,
           "backend": "gloo", "device": "cpu", "world_size": 2, "nodes": 2, "ranks_per_node": [1, 1],
           "model": {"kind": "mlp", "width": 2048, "depth": 6, "params": 25178112,
                     "grad_dtype": "fp32", "batch_per_rank": 64},
           "torch_version": "2.13.0", "phases": phases}
    if error:
        doc["error"] = error
    return doc


def outcomes_for(options: BenchOptions, failed: dict[str, tuple[str, str]] | None = None,
                 stages: dict[str, str] | None = None) -> list[JobOutcome]:
    jobs, _ = plan_jobs(options, "/r", nnodes=2, backend="gloo")
    failed, stages = failed or {}, stages or {}
    out = []
    for job in jobs:
        error_id, message = failed.get(job.name) or (None, None)
        out.append(JobOutcome(job, job.name not in failed, 10.0, error_id, message,
                              stage=stages.get(job.name)))
    return out


def test_wire_rate_is_the_slowest_pair_at_its_best_stream_count() -> None:
    wire = wire_rate(tcp_doc({(0, 1, 1): 110 * MB, (0, 1, 4): 118 * MB,
                              (1, 0, 1): 112 * MB, (1, 0, 4): 115 * MB}))
    assert wire is not None
    assert wire["wire_bytes_per_s"] == 115 * MB and wire["slowest_pair"] == [1, 0]
    assert wire["by_streams"] == {"1": 110 * MB, "4": 115 * MB}
    assert wire["failed"] == []


def test_a_failed_pair_is_named_and_the_rest_still_give_a_rate() -> None:
    wire = wire_rate(tcp_doc({(0, 1, 1): 100 * MB, (1, 0, 1): None}))
    assert wire is not None and wire["wire_bytes_per_s"] == 100 * MB
    assert len(wire["failed"]) == 1 and "node 1 -> node 0" in wire["failed"][0]
    assert wire_rate(tcp_doc({(0, 1, 1): None}))["wire_bytes_per_s"] is None  # type: ignore[index]
    assert wire_rate(None) is None


def _payload(docs: dict[str, Any], options: BenchOptions | None = None,
             **kw: Any) -> dict[str, Any]:
    options = options or BenchOptions(settings=("bf16", "powersgd:4", "accumulate:4"))
    return build_payload(options, CLUSTER, kw.pop("outcomes", outcomes_for(options)), docs, **kw)


GOOD_DOCS = {
    "tcp.json": tcp_doc({(0, 1, 1): 120 * MB, (1, 0, 1): 120 * MB}),
    "collectives.json": collectives_doc({1 << 20: 60 * MB, 64 << 20: 114 * MB}),
    "scaling-none.json": scaling_doc("none", 0.300, 1.000),
    "scaling-bf16.json": scaling_doc("bf16", 0.310, 0.600, hook_one=0.330),
    "scaling-powersgd-4.json": scaling_doc("powersgd:4", 0.290, 0.500, hook_one=0.640),
    "scaling-accumulate-4.json": scaling_doc("accumulate:4", 0.300, 0.400),
}


def test_busbw_is_put_next_to_the_wire_and_inter_node_uses_the_largest_size() -> None:
    p = _payload(GOOD_DOCS)
    rows = p["collectives"]["ops"][0]["results"]
    assert [r["busbw_over_tcp"] for r in rows] == pytest.approx([0.5, 0.95])
    assert p["inter_node"]["bytes"] == 64 << 20
    assert p["inter_node"]["busbw_bytes_per_s"] == 114 * MB
    assert p["inter_node"]["busbw_over_tcp"] == pytest.approx(0.95)
    assert p["collectives"]["ops"][1]["supported"] is False  # a skipped op stays, with its note
    assert p["tcp"]["wire_bytes_per_s"] == 120 * MB


def test_efficiency_uses_each_jobs_own_one_node_reference() -> None:
    p = _payload(GOOD_DOCS)
    by = {r["setting"]: r for r in p["scaling"]}
    assert list(by) == ["none", "bf16", "powersgd:4", "accumulate:4"]
    assert by["none"]["efficiency"] == pytest.approx(0.30)
    assert by["bf16"]["efficiency"] == pytest.approx(0.310 / 0.600)
    assert by["accumulate:4"]["throughput_vs_one_node"] == pytest.approx(2 * 0.75)
    assert by["accumulate:4"]["one_node_samples_per_s"] == pytest.approx(64 / 0.300)
    assert all(r["ok"] for r in by.values())


def test_single_node_block_is_the_median_reference_plus_median_in_job_hook_overhead() -> None:
    single = _payload(GOOD_DOCS)["single_node"]
    assert single["step_s"] == pytest.approx(0.300)  # median of 0.300, 0.310, 0.290, 0.300
    assert single["hook_overhead_s"] == pytest.approx({"bf16": 0.020, "powersgd:4": 0.350})
    assert single["hook_step_s"] == pytest.approx({"bf16": 0.320, "powersgd:4": 0.650})


def test_the_document_is_what_plan_from_bench_reads() -> None:
    doc = document("bench", 1, _payload(GOOD_DOCS))
    facts = parse_bench(doc)
    assert facts.params == 25178112 and facts.grad_dtype == "fp32"
    assert (facts.nodes, facts.gpus_per_node, facts.backend, facts.device) == (2, 1, "gloo", "cpu")
    assert facts.inter_node_busbw == 114 * MB
    assert facts.one_node_step_s == pytest.approx(0.300)
    assert dict(facts.hook_step_s) == pytest.approx({"bf16": 0.320, "powersgd:4": 0.650})
    assert ("accumulate:4", 2, 0.4) in facts.scaling


def test_a_hung_setting_is_failed_with_where_it_hung_and_never_recommended() -> None:
    options = BenchOptions(settings=("powersgd:1", "accumulate:4"))
    outcomes = outcomes_for(options, failed={"scaling:powersgd:1": ("job-timeout", "stopped")},
                            stages={"scaling:powersgd:1": "2 nodes, powersgd:1: timing 12 micro-steps"})
    docs = {"scaling-none.json": scaling_doc("none", 0.3, 1.0),
            # the job wrote its one-node phases, then hung in the all-nodes phase
            "scaling-powersgd-1.json": {**scaling_doc("powersgd:1", 0.3, None, hook_one=0.6),
                                        "ok": False},
            "scaling-accumulate-4.json": scaling_doc("accumulate:4", 0.3, 0.5)}
    p = _payload(docs, options, outcomes=outcomes)
    row = next(r for r in p["scaling"] if r["setting"] == "powersgd:1")
    assert row["ok"] is False and "step_s" not in row and "efficiency" not in row
    assert row["error"] == "timed out after 300 s in 2 nodes, powersgd:1: timing 12 micro-steps"
    assert p["recommendation"]["setting"] != "powersgd:1"
    assert "powersgd:1" in p["recommendation"]["failed"]
    assert p["single_node"]["hook_step_s"]["powersgd:1"] == pytest.approx(0.6)  # still measured
    assert p["ok"] is True  # a failed reduction is a finding, not a failed bench
    facts = parse_bench(document("bench", 1, p))
    assert ("powersgd:1", 2, None) in facts.scaling


def test_a_crashed_job_without_any_document_is_failed_with_the_launch_error() -> None:
    options = BenchOptions(settings=("fp16",))
    outcomes = outcomes_for(options, failed={"scaling:fp16": ("job-failed", "rank 1 died")})
    p = _payload({"scaling-none.json": scaling_doc("none", 0.3, 1.0)}, options, outcomes=outcomes)
    row = next(r for r in p["scaling"] if r["setting"] == "fp16")
    assert row == {"setting": "fp16", "nodes": 2, "ok": False, "one_node_step_s": None,
                   "error": "job-failed: rank 1 died"}


def test_replicas_that_disagree_fail_the_setting() -> None:
    row = scaling_row(None, scaling_doc("bf16", 0.3, 0.5, ok=False), 2)
    assert row["ok"] is False and "different parameters" in row["error"]


def test_plain_ddp_failing_or_wrong_elements_fail_the_bench() -> None:
    options = BenchOptions(settings=("bf16",))
    bad_plain = _payload({**GOOD_DOCS, "scaling-none.json": {**scaling_doc("none", 0.3, None),
                                                             "ok": False, "error": "boom"}},
                         options)
    assert bad_plain["ok"] is False
    wrong = _payload({**GOOD_DOCS, "collectives.json": collectives_doc({1 << 20: 1e8}, wrong=3)},
                     options)
    assert wrong["ok"] is False
    net_failed = _payload(GOOD_DOCS, options, outcomes=outcomes_for(
        options, failed={"net": ("job-failed", "x")}))
    assert net_failed["ok"] is False
    assert _payload(GOOD_DOCS, options)["ok"] is True


def test_recommendation_is_the_least_invasive_setting_over_the_threshold() -> None:
    table = [{"setting": "none", "ok": True, "efficiency": 0.29},
             {"setting": "bf16", "ok": True, "efficiency": 0.50},
             {"setting": "powersgd:1", "ok": True, "efficiency": 0.95},
             {"setting": "accumulate:4", "ok": True, "efficiency": 0.72},
             {"setting": "bf16+accumulate:4", "ok": True, "efficiency": 0.85}]
    rec = recommend(table, nodes=2, threshold=0.7)
    assert rec["decision"] == "go-multi-node" and rec["setting"] == "accumulate:4"
    assert "72% measured efficiency" in rec["text"] and "1.44x" in rec["text"]
    assert "no_sync" in rec["cost"]
    rec = recommend(table, nodes=2, threshold=0.9)
    assert rec["setting"] == "powersgd:1"
    assert "changes the optimisation" in rec["cost"] and "convergence" in rec["cost"]


def test_recommendation_never_picks_a_failed_setting_even_if_it_looks_best() -> None:
    table = [{"setting": "none", "ok": True, "efficiency": 0.3},
             {"setting": "powersgd:4", "ok": False, "efficiency": 0.99},
             {"setting": "bf16", "ok": True, "efficiency": 0.5}]
    rec = recommend(table, nodes=2, threshold=0.7)
    assert rec["decision"] == "stay-on-one-node" and rec["setting"] == "bf16"
    assert rec["failed"] == ["powersgd:4"] and "never recommended: powersgd:4" in rec["text"]
    assert "slower than one (1.00x)" in rec["text"]
    rec = recommend(table, nodes=2, threshold=0.45)
    assert rec["setting"] == "bf16"


def test_recommendation_without_any_working_setting_is_undecided() -> None:
    rec = recommend([{"setting": "none", "ok": False}], nodes=2, threshold=0.7)
    assert rec["decision"] == "undecided" and rec["setting"] is None
    rec = recommend([{"setting": "none", "ok": True, "efficiency": None}], nodes=1, threshold=0.7)
    assert rec["decision"] == "undecided" and "2+ nodes" in rec["text"]


def test_socket_sweep_best_and_the_nccl_conf_command() -> None:
    options = BenchOptions(collectives=False, tcp=False, scaling=False, socket_sweep=True,
                           quick=True)
    jobs, _ = plan_jobs(options, "/r", nnodes=2, backend="nccl")
    rates = {None: 2e9, (2, 2): 2.5e9, (4, 4): 3.1e9, (8, 8): 3.1e9, (4, 16): 1e9, (16, 4): None}
    docs, outcomes = {}, []
    for job in jobs:
        rate = rates[job.socket]
        if rate is not None:
            docs[job.output] = {"ops": [{"op": "all_reduce", "results": [
                {"bytes": 1, "busbw": rate / 2}, {"bytes": 2, "busbw": rate}]}], "wrong_total": 0}
        outcomes.append(JobOutcome(job, rate is not None, 5.0,
                                   None if rate else "job-failed", None if rate else "hung"))
    sweep = build_payload(options, CLUSTER, outcomes, docs)["socket_sweep"]
    assert sweep["status"] == "done" and len(sweep["results"]) == 6
    best = sweep["best"]
    assert (best["nthreads"], best["nsocks_perthread"]) == (4, 4)  # ties: fewer sockets in all
    assert best["vs_default"] == pytest.approx(1.55) and best["worth_it"]
    assert best["command"] == "ddpkit nccl-conf set NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4"
    failed = next(r for r in sweep["results"] if r["nthreads"] == 16)
    assert failed["ok"] is False and failed["error"] == "hung"


def test_socket_sweep_skip_is_reported() -> None:
    options = BenchOptions(socket_sweep=True, settings=("none",))
    p = build_payload(options, CLUSTER, outcomes_for(options), GOOD_DOCS,
                      socket_skipped="needs NCCL")
    assert p["socket_sweep"] == {"status": "skipped", "reason": "needs NCCL", "results": [],
                                 "best": None}


def test_a_reference_that_moved_during_the_job_marks_the_row_noisy() -> None:
    doc = scaling_doc("bf16", 0.3, 0.6)
    doc["phases"]["one_node"]["none"].update(before_step_s=0.2, after_step_s=0.4)
    row = scaling_row(None, doc, 2)
    assert row["ok"] is True and row["noisy"] is True
    assert row["reference_spread"] == pytest.approx(2 / 3)
    assert row["noise"] == "the 1-node reference moved 67% during the job"
    steady = scaling_doc("bf16", 0.3, 0.6)
    steady["phases"]["one_node"]["none"].update(before_step_s=0.29, after_step_s=0.31)
    assert scaling_row(None, steady, 2)["noisy"] is False


def test_more_than_full_efficiency_with_one_rank_per_node_is_noise() -> None:
    row = scaling_row(None, scaling_doc("accumulate:4", 1.09, 0.75), 2)
    assert row["efficiency"] == pytest.approx(1.09 / 0.75)
    assert row["noisy"] is True and "impossible with one rank per node" in row["noise"]


def test_noisy_rows_are_not_recommended_while_a_clean_one_exists() -> None:
    table = [{"setting": "none", "ok": True, "efficiency": 0.3, "noisy": False},
             {"setting": "accumulate:4", "ok": True, "efficiency": 1.46, "noisy": True,
              "noise": "146% efficiency is impossible with one rank per node"},
             {"setting": "bf16+accumulate:4", "ok": True, "efficiency": 0.8, "noisy": False}]
    rec = recommend(table, nodes=2, threshold=0.7)
    assert rec["setting"] == "bf16+accumulate:4" and rec["not_judged"] == ["accumulate:4"]
    assert "Not judged (failed the sanity check): accumulate:4; repeat the run" in rec["text"]
    assert "accumulate:4 146%: 146% efficiency is impossible" in rec["repeat"]


def test_when_every_row_or_plain_ddp_fails_its_check_nothing_is_advice() -> None:
    table = [{"setting": "none", "ok": True, "efficiency": 0.3, "noisy": False},
             {"setting": "accumulate:4", "ok": True, "efficiency": 1.46, "noisy": True,
              "noise": "the 1-node reference moved 40% during the job"}]
    all_noisy = [{**r, "noisy": True, "noise": "x"} for r in table]
    rec = recommend(all_noisy, nodes=2, threshold=0.7)
    assert rec["decision"] == "undecided" and rec["setting"] is None
    assert "repeat the run" in rec["text"] and "go multi-node" not in rec["text"]
    plain_odd = [{**table[0], "efficiency": 2.74, "noisy": True, "noise": "y"},
                 {**table[1], "efficiency": 0.9, "noisy": False}]
    rec = recommend(plain_odd, nodes=2, threshold=0.7)  # accumulate:4 passes, but its reference
    assert rec["decision"] == "undecided" and rec["setting"] is None  # run is suspect too


def _issue_31_run() -> tuple[BenchOptions, dict[str, Any]]:
    """`bench --quick` across 2 nodes, the worker without OMP_NUM_THREADS=1 (issue 31): plain DDP
    274%, powersgd:1 308%, accumulate:4 53%; the 1-node reference ran with 1 vs 8 threads."""
    options = BenchOptions(settings=("none", "powersgd:1", "accumulate:4"))
    docs = dict(GOOD_DOCS)
    for setting, one, multi in (("none", 0.274, 0.1), ("powersgd:1", 0.308, 0.1),
                                ("accumulate:4", 0.053, 0.1)):
        doc = scaling_doc(setting, one, multi, hook_one=one)
        doc["phases"]["one_node"]["none"]["per_node_threads"] = [[1, "1"], [8, None]]
        docs[f"scaling-{setting.replace(':', '-')}.json"] = doc
    return options, docs


def test_a_run_that_fails_its_own_sanity_check_is_never_advice() -> None:
    options, docs = _issue_31_run()
    outcomes = outcomes_for(options)
    assert {o.job.output for o in outcomes if o.job.kind == "scaling"} <= set(docs)
    payload = build_payload(options, CLUSTER, outcomes, docs)
    rows = {r["setting"]: r for r in payload["scaling"]}
    assert rows["none"]["efficiency"] == pytest.approx(2.74)
    assert rows["none"]["noisy"] and rows["powersgd:1"]["noisy"]
    assert not rows["accumulate:4"]["noisy"]
    rec = payload["recommendation"]
    assert rec["decision"] == "undecided" and rec["setting"] is None and rec["efficiency"] is None
    assert "go multi-node" not in rec["text"] and "stay on one node" not in rec["text"]
    assert "none 274%: 274% efficiency is impossible with one rank per node" in rec["text"]
    assert "node 0: 1 (OMP_NUM_THREADS=1), node 1: 8 (OMP_NUM_THREADS unset)" in rec["repeat"]
    table = report.scaling_table(payload)
    assert table is not None
    marked = {row[0]: row for row in table.rows}
    assert marked["none"][5] == "274%?" and marked["none"][6].startswith("FAILED CHECK: 274%")
    assert marked["accumulate:4"][5] == "53%" and marked["accumulate:4"][6] == "ok"
    assert "not advice" in table.footer[0]
    data = plot_data(payload, 0.7)
    assert data.suspect == (True, True, False)
    # plan --from-bench on the same file: bench's figures, bench's marks, bench's warning
    plan = make_plan(PlanRequest(), parse_bench(document("bench", 1, payload)))
    shown = {r.setting.label: r for r in plan.results}
    for label, row in rows.items():
        assert shown[label].measured_efficiency == pytest.approx(row["efficiency"])
        assert (shown[label].measured_check is not None) == row["noisy"]
    assert "274% efficiency is impossible" in (shown["none"].measured_check or "")
    assert plan.verdict.decision == "undecided" and plan.verdict.setting is None
    assert rec["repeat"] in plan.verdict.text
