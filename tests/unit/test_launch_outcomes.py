"""Which failure came first across a whole job, and how each node's end is read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ddpkit.launch.outcomes import (
    FAILED,
    LOST,
    OK,
    STOPPED,
    NodeOutcome,
    first_failure,
    is_consequence,
    job_summary,
    outcome_from_error,
)
from ddpkit.launch.ssh.fanout import NodeCommand, outcome_of, parse_document
from ddpkit.launch.ssh.hostfile import Host


def _rank_failure(node: int, *, at: float, exitcode: int, signal: str | None = None,
                  lines: tuple[str, ...] = ()) -> NodeOutcome:
    return NodeOutcome(node_rank=node, host=f"node{node}", state=FAILED, error_id="job-failed",
                       rank=node, local_rank=0, exitcode=exitcode, signal=signal,
                       last_lines=lines, observed_at=at)


RESET = ("RuntimeError: [gloo/transport/tcp/pair.cc:534] Read error [10.0.0.3]:1234: "
         "Connection reset by peer",)


def test_the_rank_killed_by_sigkill_wins_over_its_victims_even_when_reported_later() -> None:
    victim = _rank_failure(0, at=1.0, exitcode=1, lines=RESET)
    killed = _rank_failure(1, at=2.5, exitcode=-9, signal="SIGKILL")
    assert first_failure([victim, killed]) is killed
    assert is_consequence(victim) and not is_consequence(killed)


def test_among_causes_the_earliest_wins() -> None:
    late = _rank_failure(0, at=5.0, exitcode=3, lines=("ValueError: bad batch",))
    early = _rank_failure(2, at=1.0, exitcode=2, lines=("KeyError: 'lr'",))
    assert first_failure([late, early]) is early


def test_ties_go_to_the_lowest_node_rank() -> None:
    a, b = _rank_failure(2, at=1.0, exitcode=1), _rank_failure(1, at=1.0, exitcode=1)
    assert first_failure([a, b]) is b


def test_a_lost_node_is_a_cause_and_stopped_nodes_never_count() -> None:
    lost = NodeOutcome(node_rank=2, host="node2", state=LOST, message="ssh ended", observed_at=9.0)
    stopped = NodeOutcome(node_rank=0, host="node0", state=STOPPED, observed_at=0.5)
    victim = _rank_failure(1, at=3.0, exitcode=1, lines=("Connection closed by peer",))
    assert first_failure([stopped, victim, lost]) is lost
    assert first_failure([stopped, NodeOutcome(node_rank=1, host="n", state=OK)]) is None


@pytest.mark.parametrize("signal, exitcode", [("SIGTERM", -15), (None, -15), (None, -2), ("SIGHUP", -1)])
def test_ranks_told_to_stop_are_consequences(signal: str | None, exitcode: int) -> None:
    assert is_consequence(_rank_failure(0, at=0, exitcode=exitcode, signal=signal))


def test_summary_names_host_rank_how_and_last_lines() -> None:
    killed = _rank_failure(1, at=2.0, exitcode=-9, signal="SIGKILL", lines=("step 10", "step 11"))
    victim = _rank_failure(0, at=1.0, exitcode=1, lines=RESET)
    stopped = NodeOutcome(node_rank=2, host="node2", state=STOPPED)
    text = job_summary([victim, killed, stopped])
    assert text.startswith("node 1 (node1, rank 1, local rank 0) failed first: killed by SIGKILL. "
                           "Its last output: step 10 | step 11. Then: ")
    assert "node 0 (node0) failed too (exit code 1)" in text and "node 2 (node2) was stopped" in text
    assert job_summary([NodeOutcome(node_rank=0, host="a", state=OK)] * 2) == \
        "all 2 nodes finished successfully"


ERROR_DOC: dict[str, Any] = {
    "schema": "ddpkit.error/1",
    "error": {
        "id": "job-failed",
        "message": "node 1 (node1): rank 1 (local rank 0, host node1) failed first: killed by "
                   "SIGKILL. Its last output: about to die | bye",
        "hint": "...", "exit_code": 6,
        "details": {"root_cause": {"host": "node1", "rank": 1, "local_rank": 0, "exitcode": -9,
                                   "signal": "SIGKILL", "how": "killed by SIGKILL"}},
    },
}


def test_outcome_from_a_node_error() -> None:
    outcome = outcome_from_error(ERROR_DOC["error"], node_rank=1, host="10.0.0.3", observed_at=4.0)
    assert (outcome.state, outcome.rank, outcome.exitcode, outcome.signal) == (FAILED, 1, -9, "SIGKILL")
    assert outcome.last_lines == ("about to die", "bye") and outcome.how() == "killed by SIGKILL"
    stopped = outcome_from_error({"id": "job-stopped", "message": "stopped"}, node_rank=0, host="h")
    assert stopped.state == STOPPED
    terminated = outcome_from_error(
        {"id": "job-failed", "message": "m", "details": {"root_cause": {
            "rank": 0, "local_rank": 0, "exitcode": -15, "signal": "SIGTERM"}}},
        node_rank=0, host="h", stopped=True)
    assert terminated.state == STOPPED
    assert NodeOutcome.from_dict(outcome.to_dict()) == outcome.__class__(**{
        **outcome.__dict__, "observed_at": 0.0})


def _node(local: bool = False) -> NodeCommand:
    return NodeCommand(node_rank=1, host=Host(name="10.0.0.3"), local=local, argv=("ssh",),
                       node_argv=("python",), env=None, cwd="/")


def test_outcome_of_a_node_from_its_printed_document() -> None:
    stdout = "motd from a login shell {not json}\n" + json.dumps(ERROR_DOC, indent=2) + "\n"
    outcome = outcome_of(_node(), returncode=6, stdout=stdout, tail=[], stopped=False, observed_at=1)
    assert outcome.state == FAILED and outcome.signal == "SIGKILL" and outcome.document == ERROR_DOC
    ok = outcome_of(_node(), returncode=0, stdout=json.dumps({"schema": "ddpkit.launch/1", "ok": True}),
                    tail=[], stopped=False, observed_at=1)
    assert ok.state == OK


def test_outcome_of_a_dead_ssh_session_or_a_silent_exit() -> None:
    tail = ["Connection to 10.0.0.3 closed by remote host."]
    lost = outcome_of(_node(), returncode=255, stdout="", tail=tail, stopped=False, observed_at=1)
    assert lost.state == LOST and "Connection to 10.0.0.3 closed" in lost.message
    assert outcome_of(_node(), returncode=255, stdout="", tail=tail, stopped=True,
                      observed_at=1).state == STOPPED
    crashed = outcome_of(_node(True), returncode=1, stdout="", tail=["boom"], stopped=False,
                         observed_at=1)
    assert crashed.state == FAILED and crashed.last_lines == ("boom",)
    interrupted = outcome_of(_node(), returncode=130, stdout="", tail=[], stopped=True, observed_at=1)
    assert interrupted.state == STOPPED


def test_failed_checks_in_a_test_document_are_a_failure() -> None:
    doc = {"schema": "ddpkit.test/1", "ok": False, "summary": "2 nodes × 1 rank: FAILED · x"}
    outcome = outcome_of(_node(), returncode=1, stdout=json.dumps(doc), tail=[], stopped=False,
                         observed_at=1)
    assert outcome.state == FAILED and outcome.error_id == "checks-failed"


def test_parse_document_takes_the_last_schema_document() -> None:
    text = 'x {"a": 1}\n{"schema": "ddpkit.launch/1"}\n{"schema": "ddpkit.error/1", "error": {}}'
    assert parse_document(text) == {"schema": "ddpkit.error/1", "error": {}}
    assert parse_document("no json here") is None


ABORT_AT_EXIT = (*RESET, "terminate called without an active exception")


def test_a_victim_that_aborted_at_exit_after_a_peer_reset_is_a_consequence() -> None:
    # torch 2.13 Gloo: the rank raised the peer's reset, then aborted at interpreter exit
    victim = _rank_failure(0, at=1.0, exitcode=-6, signal="SIGABRT", lines=ABORT_AT_EXIT)
    killed = _rank_failure(1, at=2.5, exitcode=-9, signal="SIGKILL",
                           lines=("rank 1 about to SIGKILL itself",))
    assert is_consequence(victim) and not is_consequence(killed)
    assert first_failure([victim, killed]) is killed


@pytest.mark.parametrize("signal, exitcode", [("SIGABRT", -6), ("SIGSEGV", -11), ("SIGKILL", -9)])
def test_a_rank_killed_by_another_signal_without_such_words_stays_a_cause(signal: str,
                                                                          exitcode: int) -> None:
    crashed = _rank_failure(1, at=1.0, exitcode=exitcode, signal=signal,
                            lines=("terminate called after throwing an instance of 'c10::Error'",))
    assert not is_consequence(crashed)
    assert not is_consequence(_rank_failure(1, at=1.0, exitcode=exitcode, signal=signal))


def test_a_node_s_own_fix_travels_and_comes_first_in_the_job_s_fix() -> None:
    """The exit-time abort's fix (or a missing module's) that a node gives for its own end
    reaches the master's summary in token and ssh modes, bounded and stripped of controls."""
    from ddpkit.cli.job.job_verdict import failure_summary

    def failure_fix(outcomes: list[NodeOutcome], general: str) -> str:
        return failure_summary(outcomes, {}, general)[1]

    fix = "free the model and call gc.collect() before dist.destroy_process_group()"
    error = {"id": "job-failed", "message": "node 0 failed first: killed by SIGABRT",
             "details": {"root_cause": {"rank": 0, "local_rank": 0, "exitcode": -6,
                                        "signal": "SIGABRT"},
                         "known_fix": fix}}
    aborted = outcome_from_error(error, node_rank=0, host="node0", observed_at=1.0)
    assert aborted.fix == fix
    stopped = outcome_from_error({"id": "job-stopped", "message": "stopped",
                                  "details": {"known_fix": "not this one"}},
                                 node_rank=1, host="node1", observed_at=2.0)
    assert stopped.fix == ""  # a stopped node's end names no cause of the job
    general = "each node's output has the details"
    assert failure_fix([aborted, stopped], general) == f"{fix}; {general}"
    without = outcome_from_error({**error, "details": {**error["details"], "known_fix": None}},
                                 node_rank=0, host="node0")
    assert failure_fix([without, stopped], general) == general
    wire = NodeOutcome.from_dict({**aborted.to_dict(), "fix": "\x1b]52;c;aGk=\x07x" * 1000})
    assert "\x1b" not in wire.fix and len(wire.fix) <= 600 and wire.fix.startswith("x")
    assert NodeOutcome.from_dict(aborted.to_dict()).fix == fix
