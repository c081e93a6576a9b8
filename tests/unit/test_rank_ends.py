"""Cause before consequence, on the recorded run of tests/fixtures/logs/captured/i24_value_error/
(node 1's rank raised ValueError at train.py:8; node 0's rank then lost it and aborted, SIGABRT,
and ended first): ``doctor --log`` on the run directories and launch's job summary, built from
the same reading (doctor/log/rank_ends.py), name node 1's rank and its exception."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from node_results import node_result

from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.rank_ends import (
    consequence_of,
    last_words,
    read_end,
    root_end,
    run_ends,
    unreported_ends,
)
from ddpkit.launch.outcomes import FAILED, NodeOutcome, first_failure, job_summary, outcome_from_error
from ddpkit.launch.torchrun.command import RankFailure
from ddpkit.launch.torchrun.tracebacks import last_exception

RUN = Path(__file__).parents[1] / "fixtures" / "logs" / "captured" / "i24_value_error"
NODE0, NODE1 = str(RUN / "node0"), str(RUN / "node1")
RAISED = "ValueError: batch 7 has 3 labels, expected 4"


def test_each_node_reads_its_own_rank_as_cause_or_consequence() -> None:
    (zero,), first0 = run_ends(NODE0)
    (one,), first1 = run_ends(NODE1)
    assert (zero.rank, zero.host, zero.how()) == (0, "node0", "killed by SIGABRT")
    assert not zero.is_cause and "connection closed by peer" in zero.consequence
    assert one.is_cause and (one.rank, one.host, one.exitcode) == (1, "node1", 1)
    assert one.raised is not None and f"{one.raised.type}: {one.raised.message}" == RAISED
    assert one.raised.where() == "train.py:8 in <module>"
    assert one.last_lines == ("rank 1: bad batch ahead",)  # not the traceback, no c10d warning
    assert first0 is not None and first1 is not None
    # node 0's end is torchrun's first observed failure on its node and the earlier one: still
    # the cause wins
    ended_first = dataclasses.replace(zero, order=0.0)
    assert root_end([ended_first, dataclasses.replace(one, order=1.0)], [first0, first1]).rank == 1


def test_doctor_log_on_both_run_directories_names_the_raising_rank_first() -> None:
    findings = diagnose([NODE0, NODE1])
    top = findings[0]
    assert top.id == "rank-failed", [f.id for f in findings]
    assert top.explanation.startswith("Rank 1 (local rank 0, on node1) failed first, on its own "
                                      "account: exit code 1. It raised " + RAISED +
                                      " (at train.py:8 in <module>)."), top.explanation
    assert "rank 0 (node0) killed by SIGABRT, its exception reports a peer gone" in top.explanation
    lost = next(f for f in findings if f.id == "connection-lost")
    assert "Rank 1 failed on its own account first" in lost.explanation
    # the launcher logs alone stand for their run directories (the fix line of older launches)
    alone = diagnose([f"{NODE0}/torchrun.log", f"{NODE1}/torchrun.log"])
    assert (alone[0].id, alone[0].explanation[:40]) == ("rank-failed", top.explanation[:40])


def test_doctor_log_on_the_aborted_node_alone_sends_the_reader_to_the_other_nodes() -> None:
    findings = diagnose([NODE0])
    assert findings[0].id == "connection-lost", [f.id for f in findings]
    failed = next(f for f in findings if f.id == "rank-failed")
    assert "followed another rank's failure, which none of these logs shows" in \
        failed.explanation
    assert "killed just before" not in findings[0].explanation


def _outcome(run_dir: str, node_rank: int, observed_at: float) -> NodeOutcome:
    """A node's outcome as the master gets it: from the launch error's details (what
    launch/node/result.py puts there) through outcome_from_error and the JSON of the store."""
    (end,), _ = run_ends(run_dir)
    root = {"rank": end.rank, "local_rank": end.local_rank, "exitcode": end.exitcode,
            "signal": end.signal}
    error = {"id": "job-failed", "message": f"node {node_rank}: rank {end.rank} failed first",
             "details": {"root_cause": root, "root_end": end.to_dict()}}
    outcome = outcome_from_error(error, node_rank=node_rank, host=end.host)
    return NodeOutcome.from_dict(outcome.to_dict(), observed_at=observed_at)  # the store's trip


def test_the_master_names_node_1_and_its_exception_although_node_0_ended_first() -> None:
    outcomes = [_outcome(NODE0, 0, observed_at=1.0), _outcome(NODE1, 1, observed_at=2.0)]
    assert [o.state for o in outcomes] == [FAILED, FAILED]
    assert first_failure(outcomes) is outcomes[1]
    summary = job_summary(outcomes)
    assert summary.startswith("node 1 (node1, rank 1, local rank 0) failed first: exit code 1. "
                              f"It raised {RAISED} (at train.py:8 in <module>)"), summary
    assert "node 0 (node0) failed too (killed by SIGABRT)" in summary


def test_the_recorded_master_output_agrees() -> None:
    error_line = next(line for line in (RUN / "master_output.txt").read_text().splitlines()
                      if line.startswith("error [job-failed]"))
    assert "node 1 (node1, rank 1" in error_line and f"{RAISED} (at train.py:8" in error_line


def test_an_abort_after_a_peer_gone_line_is_a_consequence_and_a_silent_one_a_cause() -> None:
    gloo = ("terminate called after throwing an instance of 'gloo::IoException'",
            "  what():  [gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:1")
    assert "connection closed by peer" in consequence_of(gloo, -6, "SIGABRT", None)
    assert consequence_of(("step 3",), -6, "SIGABRT", None) == ""
    assert consequence_of(("step 3",), -15, None, None).startswith("stopped by SIGTERM")
    own = ["Traceback (most recent call last):", '  File "/w/train.py", line 3, in <module>',
           "KeyError: 'label'"]
    raised = last_exception(own)
    assert consequence_of([*gloo, *own], 1, None, raised) == ""  # its own exception decides
    end = read_end(RankFailure("h", 2, 0, 1, None, None, ""), ["loading", *own])
    assert end.is_cause and last_words(["loading", *own], end.raised) == ("loading",)


def test_a_node_stopped_before_torchrun_reported_still_names_its_raising_rank(
        tmp_path: Path) -> None:
    """torchrun stopped before its failure report: the ranks' own stderr is read; a rank that
    only lost a peer is no cause and is left out."""
    one = (RUN / "node1" / "torchrun" / "none_0gy30ghp" / "attempt_0" / "0" / "stderr.log")
    zero = (RUN / "node0" / "torchrun" / "none_jgmidzem" / "attempt_0" / "0" / "stderr.log")
    for local_rank, source in ((0, zero), (1, one)):
        target = tmp_path / "none_abc" / "attempt_0" / str(local_rank) / "stderr.log"
        target.parent.mkdir(parents=True)
        target.write_bytes(source.read_bytes())
    (end,) = unreported_ends(str(tmp_path), "node1")
    assert (end.rank, end.local_rank, end.exitcode, end.is_cause) == (1, 1, 1, True)
    assert end.raised is not None and end.raised.type == "ValueError"


def test_launch_node_summaries_and_the_job_summary_from_the_same_reading() -> None:
    zero, one = node_result(RUN / "node0", 0), node_result(RUN / "node1", 1)
    assert one.summary() == ("node 1 (node1): rank 1 (local rank 0, host node1) failed first: "
                             f"exit code 1. It raised {RAISED} (at train.py:8 in <module>). Its "
                             "last output: rank 1: bad batch ahead")
    assert zero.summary().startswith("node 0 (node0): rank 0 (local rank 0, host node0) failed "
                                     "first: killed by SIGABRT (its exception reports a peer gone "
                                     "(connection closed by peer): it followed a failure "
                                     "elsewhere"), zero.summary()
    outcomes = []
    for node_rank, result in enumerate((zero, one)):
        error = {"id": "job-failed", "message": result.summary(), "details": result.to_dict()}
        outcome = outcome_from_error(error, node_rank=node_rank, host=f"node{node_rank}",
                                     observed_at=float(node_rank))  # node 0 heard of first
        outcomes.append(NodeOutcome.from_dict(outcome.to_dict(), observed_at=float(node_rank)))
    assert job_summary(outcomes).startswith(
        f"node 1 (node1, rank 1, local rank 0) failed first: exit code 1. It raised {RAISED} (at "
        "train.py:8 in <module>). Its last output: rank 1: bad batch ahead. Then: node 0 (node0) "
        "failed too (killed by SIGABRT)")


def test_the_nodes_verdict_decides_over_the_words_and_survives_the_trip() -> None:
    from ddpkit.launch.outcomes import is_consequence

    said_timeout = NodeOutcome(0, "a", FAILED, message="the data loader timed out", exitcode=1,
                               cause=True, raised="ValueError: timed out reading shard 3")
    quiet_abort = NodeOutcome(1, "b", FAILED, message="killed", exitcode=-6, cause=False)
    unknown = NodeOutcome(2, "c", FAILED, message="connection reset by peer", exitcode=1)
    assert not is_consequence(said_timeout) and is_consequence(quiet_abort)
    assert is_consequence(unknown)  # no verdict (an older ddpkit): the words decide
    back = NodeOutcome.from_dict(said_timeout.to_dict())
    assert (back.cause, back.raised) == (True, "ValueError: timed out reading shard 3")
    assert NodeOutcome.from_dict(unknown.to_dict()).cause is None
