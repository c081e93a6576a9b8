"""`ddpkit bench --strategies`: the jobs, the worker's link and memory readings, and the rows that
put the measured DDP / FSDP / HSDP steps beside plan's prediction."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ddpkit.bench.merge import ClusterInfo, JobOutcome, build_payload
from ddpkit.bench.run import BENCH_STRATEGIES, BenchOptions, peer_argv, plan_jobs
from ddpkit.bench.strategy_report import strategy_tables
from ddpkit.bench.strategy_rows import compute_from_step, strategies_block
from ddpkit.errors import UsageError

WIDTH, DEPTH = 1024, 4
PARAMS = DEPTH * (WIDTH * WIDTH + WIDTH)
RATE = 117e6  # bytes/s, a 1 Gbit link's busbw


def parse(*argv: str) -> BenchOptions:
    from ddpkit.cli.command_table import build_parser
    from ddpkit.cli.commands.bench import options_from_args

    parser, _ = build_parser("bench")
    return options_from_args(parser.parse_args(list(argv)))


def test_strategies_are_off_by_default_and_in_quick() -> None:
    for options in (parse(), parse("--quick")):
        assert options.strategies == ()
        jobs, _ = plan_jobs(options, "/r", nnodes=2, backend="gloo")
        assert not any(j.kind == "strategy" for j in jobs)


def test_strategies_alone_run_only_the_strategy_jobs_in_a_fixed_order() -> None:
    options = parse("--strategies", "hsdp,ddp", "--params", "2M", "--steps", "4")
    assert (options.tcp, options.collectives, options.scaling) == (False, False, False)
    jobs, notes = plan_jobs(options, "/r", nnodes=2, backend="gloo")
    assert [j.name for j in jobs] == ["strategy:ddp", "strategy:hsdp"]
    hsdp = jobs[1]
    assert hsdp.module == "ddpkit.workers.strategies" and hsdp.strategy == "hsdp"
    args = dict(zip(hsdp.args[::2], hsdp.args[1::2]))
    assert (args["--strategy"], args["--params"], args["--steps"]) == ("hsdp", "2000000", "4")
    assert args["--out"] == "/r/strategy-hsdp.json" and hsdp.output == "strategy-hsdp.json"
    assert ("MALLOC_MMAP_THRESHOLD_", "65536") in hsdp.env
    assert notes == ()
    _, one_node = plan_jobs(options, "/r", nnodes=1, backend="gloo")
    assert any("strategies: one node" in n for n in one_node)


def test_strategies_travel_to_the_other_nodes() -> None:
    mine = parse("--quick", "--collectives", "--strategies", "fsdp,hsdp")
    assert parse(*peer_argv(mine)[1:]) == mine


def test_an_unknown_strategy_is_refused_before_anything_runs() -> None:
    with pytest.raises(UsageError) as caught:
        parse("--strategies", "ddp,zero3")
    assert caught.value.error_id == "bad-bench-option" and "zero3" in caught.value.message


def test_the_worker_offers_exactly_the_bench_strategies() -> None:
    from ddpkit.workers.strategies import STRATEGIES

    assert STRATEGIES == BENCH_STRATEGIES


PROC_NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls\
 carrier compressed
    lo: {lo} 10 0 0 0 0 0 0 {lo} 10 0 0 0 0 0 0
  eth1: {rx} 20 0 0 0 0 0 0 {tx} 30 0 0 0 0 0 0
  veth9: {v} 1 0 0 0 0 0 0 {v} 1 0 0 0 0 0 0
"""


def test_link_bytes_count_the_gloo_interface_and_skip_loopback_and_resets() -> None:
    from ddpkit.workers.strategies import interface_bytes, link_bytes

    before = interface_bytes(PROC_NET_DEV.format(lo=5, rx=1000, tx=2000, v=900))
    after = interface_bytes(PROC_NET_DEV.format(lo=99999, rx=1500, tx=2700, v=100))
    assert set(before) == {"eth1", "veth9"}
    assert link_bytes(before, after, "eth1") == (["eth1"], 500, 700)
    # without GLOO_SOCKET_IFNAME: every interface, but one whose counters went back is left out
    assert link_bytes(before, after, None) == (["eth1"], 500, 700)
    assert link_bytes(before, {}, None) == ([], 0, 0)


@pytest.mark.parametrize("overlap", [0.0, 0.7])
def test_compute_is_solved_so_that_plans_one_node_step_is_the_measured_one(overlap: float) -> None:
    from ddpkit.bench.planning.model import exposed_seconds

    for comm in (0.0, 0.05, 0.25):
        compute = compute_from_step(0.3, lambda c, m=comm: exposed_seconds(m, c, overlap))
        assert compute + exposed_seconds(comm, compute, overlap) == pytest.approx(0.3, rel=1e-9)
    # plan's 1-node communication alone is longer than the measured step: no compute is left
    assert compute_from_step(0.3, lambda c: exposed_seconds(0.5, c, overlap)) == pytest.approx(
        0.0, abs=1e-12)


def strategy_doc(strategy: str, one: float, multi: float, state: float,
                 link: float | None = None) -> dict[str, Any]:
    def phase(step: float, ranks: int, moved: float | None) -> dict[str, Any]:
        nodes = [] if moved is None else [
            {"node": n, "interfaces": ["eth1"], "rx_bytes_per_step": moved * (0.9 + 0.1 * n),
             "tx_bytes_per_step": moved * 0.95} for n in (0, 1)]
        return {"ranks": ranks, "step_s": step, "state_bytes": state, "peak_rss_delta": 2 * state,
                "cuda_peak": None, "link": nodes, "per_rank": [], "ok": True, "problems": []}

    return {"schema": "ddpkit.strategy-run/1", "strategy": strategy, "ok": True,
            "backend": "gloo", "device": "cpu", "world_size": 4, "nodes": 2, "ranks_per_node": 2,
            "model": {"kind": "mlp", "width": WIDTH, "depth": DEPTH, "params": PARAMS,
                      "dtype": "fp32", "optimizer": "adam", "batch_per_rank": 32},
            "phases": {"one_node": phase(one, 2, None), "all_nodes": phase(multi, 4, link),
                       "one_node_again": phase(one + 0.1, 2, None)}}


def outcome(strategy: str, ok: bool = True, **more: Any) -> JobOutcome:
    options = BenchOptions(collectives=False, tcp=False, scaling=False, strategies=(strategy,))
    job = next(j for j in plan_jobs(options, "/r", nnodes=2, backend="gloo")[0])
    return JobOutcome(job, ok, 1.0, **more)


def test_rows_put_the_measurement_beside_plans_traffic_and_memory() -> None:
    p = float(PARAMS)
    docs = {"strategy-ddp.json": strategy_doc("ddp", 0.2, 0.4, 16 * p, 2 * 4 * p),
            "strategy-fsdp.json": strategy_doc("fsdp", 0.3, 0.9, 4 * p, 0.75 * 12 * p),
            "strategy-hsdp.json": strategy_doc("hsdp", 0.3, 0.5, 8 * p, 4 * p)}
    inter = {"busbw_bytes_per_s": RATE}
    block = strategies_block([outcome(s) for s in ("hsdp", "fsdp", "ddp")], docs, inter, None,
                             None)
    assert block is not None and block["link"]["overlap"] == 0.0  # the workers ran on CPU
    assert block["link"]["inter_node_bytes_per_s"] == RATE
    rows = {r["strategy"]: r for r in block["rows"]}
    assert list(rows) == ["ddp", "fsdp", "hsdp"]
    # docs/plan.md, "Traffic per strategy", at N = 2 nodes x G = 2, counted as Gloo runs them (the
    # workers' backend): DDP one ring over k = 4 ranks, 2 (k-1)/k x 4P; FSDP's reduce-scatter a
    # whole all-reduce, (k-1)/k x P (4 + 4 + 2 x 4)
    assert block["link"]["backend"] == "gloo"
    assert rows["ddp"]["predicted"]["link_bytes_per_step"] == pytest.approx(1.5 * 4 * p)
    assert rows["fsdp"]["predicted"]["link_bytes_per_step"] == pytest.approx(0.75 * 16 * p)
    assert rows["hsdp"]["predicted"]["link_bytes_per_step"] == pytest.approx(4 * p)
    # Adam, fp32: 16 bytes per parameter over the shard group (DDP 1, HSDP G = 2, FSDP 4 ranks)
    assert [rows[s]["predicted"]["state_bytes"] for s in ("ddp", "hsdp", "fsdp")] == \
        pytest.approx([16 * p, 8 * p, 4 * p])
    for row in rows.values():
        got, plan, ratio = row["measured"], row["predicted"], row["ratio"]
        assert row["ok"] and ratio["state"] == pytest.approx(1.0)
        assert ratio["step"] == pytest.approx(got["step_s"] / plan["step_s"])
        assert ratio["link_bytes"] == pytest.approx(got["link_bytes_per_step"]
                                                    / plan["link_bytes_per_step"])
        # the N-node step is the 1-node step with the N-node exposed communication in place of
        # the 1-node one; on Gloo FSDP and HSDP hide nothing (blocking collectives on CPU)
        assert plan["step_s"] == pytest.approx(got["one_node_step_s"]
                                               - plan["one_node_exposed_comm_s"]
                                               + plan["exposed_comm_s"])
        if row["strategy"] != "ddp":
            assert plan["exposed_comm_s"] == plan["comm_s"]
    # DDP's buckets for 4 layers of 4.2 MB: the last layer alone (over the 1 MiB first cap), then
    # the other three (under 25 MiB), ready only when backward ends: a quarter of it hides
    ddp = rows["ddp"]["predicted"]
    assert ddp["exposed_comm_s"] == pytest.approx(0.75 * ddp["comm_s"])
    assert rows["ddp"]["measured"]["link_bytes_per_step"] == pytest.approx(2 * 4 * p)  # node 1 rx
    # the 1-node reference is the mean of before and after the all-nodes phase
    assert rows["ddp"]["measured"]["one_node_step_s"] == pytest.approx(0.25)
    # with the bytes the link carried, plan's step grows by their extra time on the measured rate
    assert ddp["step_s_at_measured_bytes"] - ddp["step_s"] == pytest.approx(
        0.75 * 0.5 * 4 * p / RATE)
    # ddp measured 0.4 s, 0.25 s of compute and 2 x 4P bytes at RATE: what was hidden of them
    comm = 2 * 4 * p / RATE + (ddp["comm_s"] - 1.5 * 4 * p / RATE)
    assert rows["ddp"]["measured"]["implied_overlap"] == pytest.approx(
        (ddp["compute_s"] + comm - 0.4) / min(comm, ddp["compute_s"]))
    assert rows["hsdp"]["ratio"]["step_at_measured_bytes"] == pytest.approx(
        rows["hsdp"]["ratio"]["step"])  # it carried exactly plan's count
    assert rows["fsdp"]["predicted"]["comm_s"] > rows["hsdp"]["predicted"]["comm_s"]
    tables = strategy_tables({"strategies": block})
    assert [len(t.rows) for t in tables] == [3, 3]
    assert tables[0].rows[1][0] == "fsdp" and tables[0].rows[1][-1] == "ok"
    assert "2 nodes x 2 ranks" in tables[0].title


def test_a_failed_strategy_is_shown_failed_without_a_ratio_and_the_bench_still_stands() -> None:
    docs = {"strategy-fsdp.json": {"schema": "ddpkit.strategy-run/1", "strategy": "fsdp",
                                   "ok": False, "phases": {}}}
    failed = outcome("fsdp", ok=False, error_id="job-timeout", stage="all_nodes: warm-up")
    block = strategies_block([failed], docs, None, 1e8, "cpu")
    assert block is not None and block["link"]["basis"] == "raw TCP wire rate"
    row = block["rows"][0]
    assert row["ok"] is False and "timed out" in row["error"] and "ratio" not in row
    table = strategy_tables({"strategies": block})[0]
    assert table.rows[0][-1].startswith("FAILED: timed out")
    cluster = ClusterInfo(2, "2", "eth1", "10.0.0.2", "node0")
    payload = build_payload(BenchOptions(collectives=False, tcp=False, scaling=False,
                                         strategies=("fsdp",)), cluster, [failed], docs)
    assert payload["ok"] is True and payload["strategies"]["rows"][0]["ok"] is False


def test_without_a_measured_link_there_is_no_prediction_and_a_note_says_why() -> None:
    docs = {"strategy-ddp.json": strategy_doc("ddp", 0.2, 0.4, 16.0 * PARAMS)}
    block = strategies_block([outcome("ddp")], docs, None, None, None)
    assert block is not None and block["link"] is None and "predicted" not in block["rows"][0]
    assert "--collectives" in block["notes"][0]
    assert strategy_tables({"strategies": block})[0].footer[0] == block["notes"][0]


def test_no_strategy_jobs_no_block() -> None:
    assert strategies_block([SimpleNamespace(job=SimpleNamespace(kind="net"))],  # type: ignore[list-item]
                            {}, None, None, None) is None


def test_the_one_node_steps_alternated_with_the_all_nodes_ones_are_the_reference() -> None:
    p = float(PARAMS)
    doc = strategy_doc("fsdp", 0.3, 0.9, 4 * p, 0.75 * 12 * p)
    del doc["phases"]["one_node_again"]  # this worker's phases: one node, then all nodes
    doc["phases"]["all_nodes"]["one_node_step_s"] = 0.5  # a busier box during the all-nodes phase
    doc["phases"]["one_node"]["intra_allreduce"] = {"bytes": 4 * p, "seconds": 4 * p / 2e9}
    block = strategies_block([outcome("fsdp")], {"strategy-fsdp.json": doc},
                             {"busbw_bytes_per_s": RATE}, None, None)
    assert block is not None
    row = block["rows"][0]
    assert row["measured"]["one_node_step_s"] == 0.5 and row["measured"]["one_node_steps_s"] == \
        [0.3, 0.5]
    plan = row["predicted"]
    # the node's own all-reduce at 2 GB/s busbw (2 ranks: 4P bytes in 4P / 2e9 s) is plan's
    # intra-node rate, and the compute is what is left of the alternated 1-node step
    assert plan["intra_node_bytes_per_s"] == pytest.approx(2e9)
    assert plan["compute_s"] == pytest.approx(0.5 - plan["one_node_comm_s"])
    assert plan["step_s"] == pytest.approx(plan["compute_s"] + plan["comm_s"])
