"""One engine (issue 24): the root cause launch's master names, from the readings its nodes send
(doctor/log/verdict.NodeLogs, through JSON as over ssh or the job store), is the one
``doctor --log <every node's run directory>`` tops: the same finding, the same rank. Run
directories here are the recorded one (tests/fixtures/logs/captured/i24_value_error) and small
ones written in the shape a launch leaves (torchrun.log, torchrun/<id>/attempt_0/<local>/)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from node_results import node_result

from ddpkit.cli.job.job_verdict import failure_summary, judge
from ddpkit.doctor.log.diagnose import read_verdict
from ddpkit.doctor.log.rank_ends import run_ends
from ddpkit.doctor.log.verdict import (
    FILE_EVENTS,
    HEAD_BYTES,
    TAIL_BYTES,
    NodeLogs,
    read_node,
    verdict,
)
from ddpkit.launch.outcomes import FAILED, STOPPED, NodeOutcome, first_failure, outcome_from_error

RUN = Path(__file__).parents[1] / "fixtures" / "logs" / "captured" / "i24_value_error"
KEYS = ("finding", "rank", "host")

_REPORT = """\
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_10:30:14
  host      : {host}
  rank      : {rank} (local_rank: 0)
  exitcode  : {code} (pid: 4242){signal}
  error_file: <N/A>
  traceback : {traceback}
============================================================
"""


def _run_dir(base: Path, node: int, *, rank: int, stderr: str, code: int | None,
             signal: str = "", mtime: float | None = None) -> Path:
    """A node's run directory: its launcher log (torchrun's report when ``code`` is given: the
    rank failed; else torchrun was stopped before it reported) and local rank 0's stderr."""
    run = base / f"node{node}"
    rank_dir = run / "torchrun" / "none_abc" / "attempt_0" / "0"
    rank_dir.mkdir(parents=True)
    report = "" if code is None else _REPORT.format(
        host=f"node{node}", rank=rank, code=code, signal=f"  ({signal})" if signal else "",
        traceback=f"Signal {-code} ({signal}) received by PID 4242" if signal else
        "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    (run / "torchrun.log").write_text(stderr + report)
    (rank_dir / "stderr.log").write_text(stderr)
    (rank_dir / "stdout.log").write_text("")
    if mtime is not None:
        os.utime(rank_dir / "stderr.log", (mtime, mtime))
    return run


def _outcome(run: Path, node: int, *, observed_at: float, stopped: bool = False) -> NodeOutcome:
    """Node ``node``'s outcome as the master receives it: the node's error document (its
    torchrun report, its rank's end, its reading of its logs) through JSON."""
    ends, first = run_ends(str(run))
    end = ends[0] if ends else None
    details: dict[str, Any] = {"logs": read_node(str(run), node).to_dict()}
    if first is not None:
        details["root_cause"] = {"rank": first.rank, "local_rank": first.local_rank,
                                 "exitcode": first.exitcode, "signal": first.signal}
    if end is not None:
        details["root_end"] = end.to_dict()
    error = json.loads(json.dumps({"id": "job-failed", "message": "", "details": details}))
    return outcome_from_error(error, node_rank=node, host=f"node{node}", observed_at=observed_at,
                              stopped=stopped)


def _doctor(*runs: Path) -> dict[str, Any]:
    return read_verdict([str(r) for r in runs]).to_dict()


def _launch(outcomes: list[NodeOutcome]) -> tuple[dict[str, Any], str]:
    payload: dict[str, Any] = {}
    summary = failure_summary(outcomes, payload, "details")[0]
    return payload["diagnosis"], summary


def _same(launched: dict[str, Any], doctored: dict[str, Any]) -> None:
    assert {k: launched[k] for k in KEYS} == {k: doctored[k] for k in KEYS}, (launched, doctored)


def test_the_recorded_value_error_run_gets_one_answer() -> None:
    node0, node1 = RUN / "node0", RUN / "node1"
    # node 0's abort reached the master first: the order of arrival must not matter
    outcomes = [_outcome(node0, 0, observed_at=1.0), _outcome(node1, 1, observed_at=2.0)]
    launched, summary = _launch(outcomes)
    doctored = _doctor(node0, node1)
    _same(launched, doctored)
    assert (doctored["finding"], doctored["rank"], doctored["host"]) == ("rank-failed", 1, "node1")
    assert launched["node_rank"] == 1 and doctored["node_rank"] is None  # doctor has no node order
    assert summary.startswith("node 1 (node1, rank 1, local rank 0) failed first: exit code 1. "
                              "It raised ValueError: batch 7 has 3 labels, expected 4 (at "
                              "train.py:8 in <module>). Its last output: rank 1: bad batch ahead"), \
        summary
    assert "node 0 (node0) failed too (killed by SIGABRT)" in summary


def _silent_sigkill(tmp_path: Path) -> tuple[Path, Path]:
    """Node 1's rank killed by SIGKILL without a word; node 0 stopped before torchrun reported
    (its rank printed nothing either): the OOM killer's signature."""
    one = _run_dir(tmp_path, 1, rank=1, stderr="step 10\n", code=-9, signal="SIGKILL")
    zero = _run_dir(tmp_path, 0, rank=0, stderr="step 10\n", code=None)
    return zero, one


def test_a_silent_sigkill_is_named_out_of_memory_by_both(tmp_path: Path) -> None:
    zero, one = _silent_sigkill(tmp_path)
    outcomes = [_outcome(zero, 0, observed_at=2.0, stopped=True),
                _outcome(one, 1, observed_at=1.0)]
    assert outcomes[0].state == STOPPED and outcomes[1].state == FAILED
    doctored = _doctor(zero, one)
    # before one engine: doctor topped out-of-memory while launch's summary named only the rank
    assert doctored["finding"] == "out-of-memory" and (doctored["rank"], doctored["host"]) == \
        (1, "node1")
    launched, summary = _launch(outcomes)
    _same(launched, doctored)
    assert summary.startswith("node 1 (node1, rank 1, local rank 0) failed first: killed by "
                              "SIGKILL. Its last output: step 10"), summary
    assert summary.endswith("[out-of-memory] (ddpkit doctor --log on every node's run directory "
                            "explains it)"), summary


def test_two_causes_the_earlier_end_wins_whichever_node_the_master_heard_first(
        tmp_path: Path) -> None:
    """Both nodes' ranks fail on their own account: doctor orders them by their ends; the master
    used to take the node it heard of first."""
    raising = ('[rank{rank}]: Traceback (most recent call last):\n'
               '[rank{rank}]:   File "/job/train.py", line {line}, in <module>\n'
               '[rank{rank}]:     {statement}\n'
               '[rank{rank}]: {error}\n')
    zero = _run_dir(tmp_path, 0, rank=0, code=1, mtime=2_000_000_100.0, stderr=raising.format(
        rank=0, line=12, statement="load()", error="KeyError: 'step_9'"))
    one = _run_dir(tmp_path, 1, rank=1, code=1, mtime=2_000_000_000.0, stderr=raising.format(
        rank=1, line=8, statement="check()", error="ValueError: batch 7 has 3 labels"))
    outcomes = [_outcome(zero, 0, observed_at=1.0), _outcome(one, 1, observed_at=2.0)]
    assert first_failure(outcomes) is outcomes[0]  # the old answer: the node heard first
    doctored = _doctor(zero, one)
    assert (doctored["finding"], doctored["rank"]) == ("rank-failed", 1)
    launched, summary = _launch(outcomes)
    _same(launched, doctored)
    assert summary.startswith("node 1 (node1, rank 1, local rank 0) failed first: exit code 1. "
                              "It raised ValueError: batch 7 has 3 labels (at train.py:8"), summary
    assert judge(outcomes)[0] is outcomes[1]


def test_without_readings_the_outcomes_decide_as_before() -> None:
    outcomes = [NodeOutcome(0, "node0", FAILED, rank=0, exitcode=1, observed_at=1.0),
                NodeOutcome(1, "node1", FAILED, rank=1, exitcode=-9, signal="SIGKILL",
                            observed_at=2.0)]
    assert judge(outcomes) == (outcomes[0], None)
    payload: dict[str, Any] = {}
    assert failure_summary(outcomes, payload, "details")[0].startswith("node 0 (node0, rank 0) failed first")
    assert "diagnosis" not in payload


def test_a_readings_json_stays_small_and_round_trips(tmp_path: Path) -> None:
    zero, one = _silent_sigkill(tmp_path)
    reading = read_node(str(one), 1)
    text = json.dumps(reading.to_dict())
    assert len(text) < 64 << 10
    again = type(reading).from_dict(json.loads(text))
    assert again == reading


@pytest.mark.parametrize("lines", [200_000])
def test_a_huge_log_is_read_by_its_head_and_tail_with_true_line_numbers(tmp_path: Path,
                                                                        lines: int) -> None:
    zero, one = _silent_sigkill(tmp_path)
    stderr = next((one / "torchrun").glob("*/attempt_0/0/stderr.log"))
    filler = "x" * 60 + "\n"
    with open(stderr, "w") as handle:
        handle.write("[rank1]: Connection reset by peer\n")  # line 1: in the head
        handle.write(filler * lines)
        handle.write("[rank1]: Connection closed by peer\n")  # in the tail
    assert stderr.stat().st_size > HEAD_BYTES + TAIL_BYTES
    events = [e for e in read_node(str(one)).events if e.file == str(stderr)]
    assert len(events) <= FILE_EVENTS
    lost = [e.line for e in events if "by peer" in e.text]
    assert lost == [1, lines + 2], lost


def test_doctor_json_carries_the_diagnosis(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    zero, one = _silent_sigkill(tmp_path)
    result = run_cli("doctor", "--log", str(zero), str(one), "--json")
    document = json.loads(result.out)
    assert document["findings"][0]["id"] == document["diagnosis"]["finding"] == "out-of-memory"
    assert (document["diagnosis"]["rank"], document["diagnosis"]["host"]) == (1, "node1")
    shutil.rmtree(zero)


def test_a_nodes_event_budget_is_shared_so_no_log_crowds_out_the_others() -> None:
    from ddpkit.doctor.log.verdict import fair_shares

    assert fair_shares([0, 5, 1000, 1000], 512) == [0, 5, 253, 254]
    assert fair_shares([10, 20], 512) == [10, 20]
    assert sum(fair_shares([300] * 17, 512)) <= 512


def test_a_lost_node_stays_first_when_the_other_ranks_only_lost_their_peer(tmp_path: Path) -> None:
    """Node 1's ssh session died (no reading from it); node 0's rank lost its peer: the engine
    names no cause, so the lost node is named first, as before."""
    zero = _run_dir(tmp_path, 0, rank=0, code=1, stderr=(
        '[rank0]: Traceback (most recent call last):\n'
        '[rank0]:   File "/job/train.py", line 5, in <module>\n'
        '[rank0]:     dist.barrier()\n'
        '[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection '
        'closed by peer [10.0.0.3]:4242\n'))
    lost = NodeOutcome(1, "node1", "lost", message="the ssh session to node1 ended",
                       observed_at=1.0)
    outcomes = [_outcome(zero, 0, observed_at=2.0), lost]
    launched, summary = _launch(outcomes)
    assert summary.startswith("node 1 (node1) failed first: the ssh session to node1 ended"), \
        summary
    assert launched["cause"] is False and launched["rank"] == 0
    _same(launched, _doctor(zero))


def test_a_nodes_own_summary_says_what_doctor_tops_on_its_run_directory(tmp_path: Path) -> None:
    """Per node (no master): the node's summary and --json name doctor's top finding too."""
    one = _run_dir(tmp_path, 1, rank=1, stderr="step 10\n", code=-9, signal="SIGKILL")
    result = node_result(one, 1)
    summary = result.summary()
    assert summary.startswith("node 1 (node1): rank 1 (local rank 0, host node1) failed first: "
                              "killed by SIGKILL; most likely cause: "), summary
    assert "[out-of-memory]. Its last output: step 10" in summary, summary
    details = json.loads(json.dumps(result.to_dict()))
    _same(details["diagnosis"], _doctor(one))
    assert details["diagnosis"]["finding"] == "out-of-memory"


def test_the_recorded_nodes_results_reach_the_same_answer_through_the_master() -> None:
    outcomes = []
    for node_rank in (0, 1):
        result = node_result(RUN / f"node{node_rank}", node_rank)
        error = json.loads(json.dumps({"id": "job-failed", "message": result.summary(),
                                       "details": result.to_dict()}))
        outcomes.append(outcome_from_error(error, node_rank=node_rank, host=f"node{node_rank}",
                                           observed_at=float(node_rank)))
    launched, summary = _launch(outcomes)
    _same(launched, _doctor(RUN / "node0", RUN / "node1"))
    assert summary.startswith("node 1 (node1, rank 1, local rank 0) failed first: exit code 1. "
                              "It raised ValueError: batch 7 has 3 labels, expected 4 (at "
                              "train.py:8 in <module>). Its last output: rank 1: bad batch ahead"), \
        summary


def test_a_node_s_event_with_a_number_no_program_prints_is_not_read(tmp_path: Path) -> None:
    # a node's reading comes over the wire: an event whose exit code has more digits than int()
    # converts (4300) is left out, and the job's verdict is still made
    zero, one = _silent_sigkill(tmp_path)
    data = read_node(str(one), 1).to_dict()
    huge = "9" * 5000
    data["events"].append(["agent-failed", "stderr.log", 3, "failed (exitcode: 9) local_rank: 0",
                           None, None, None, {"code": huge, "local_rank": "0", "pid": "1"}, 1])
    again = NodeLogs.from_dict(json.loads(json.dumps(data)), 1)
    assert len(again.events) == len(data["events"]) - 1
    assert all(huge not in e.data.values() for e in again.events)
    assert verdict([again]).findings
