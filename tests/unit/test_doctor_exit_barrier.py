"""rules/exit_barrier.py and the exit barrier's readings: torchrun's agent
(torch/distributed/elastic/agent/server/api.py, v1.9 to v2.13) enters ``_exit_barrier`` only after
its workers succeeded and, when the wait fails, logs ``logger.exception("Error waiting on exit
barrier. Elapsed: %s seconds", ...)``: the message and its traceback under one glog header
("E<mmdd> <time> <pid> <file>:<line>] "), ending in store_util.barrier's ``store.wait([last_member_
key])`` error: ``DistStoreError: wait timeout after 300000ms, keys: /<run id>/torchelastic/agent/
terminal_state/last_member`` once its timeout ran out, ``DistNetworkError: Failed to recv, got 0
bytes. Connection was likely closed. Did the remote server shutdown or crash?`` when the master's
agent closed the store first. The real runs: tests/fixtures/logs/torchrun-sim/nnodes (node 0 given
--nnodes 2, node 1 --nnodes 3) and tests/fixtures/logs/captured/torchrun_exit_barrier_race_node1.log."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
HEADER = "E1207 09:17:27.129000 {pid} torch/distributed/elastic/agent/server/api.py:1008] "
TRACE = ["Traceback (most recent call last):",
         '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/utils/store.py",'
         ' line 201, in barrier', "    store.wait([last_member_key])"]
TIMED_OUT = ("torch.distributed.DistStoreError: wait timeout after 300000ms, keys: "
             "/none/torchelastic/agent/terminal_state/last_member")
CLOSED = ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely "
          "closed. Did the remote server shutdown or crash?")


def node_log(tmp_path: Path, name: str, seconds: str, error: str, pid: int = 2183) -> str:
    head = HEADER.format(pid=pid)
    lines = ["[default0]:step 99 loss 0.12",
             head + f"Error waiting on exit barrier. Elapsed: {seconds} seconds",
             *(head + line for line in [*TRACE, error])]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_barrier_that_ran_out_is_this_node_waiting(tmp_path: Path) -> None:
    found = diagnose([node_log(tmp_path, "node1.log", "300.01815009117126", TIMED_OUT)])[0]
    assert (found.id, found.severity) == ("stopped-while-waiting", "error")
    assert "exit barrier" in found.explanation and "--nnodes" in found.explanation


def test_every_node_waiting_at_the_barrier_is_a_node_count_they_disagree_on(tmp_path: Path
                                                                             ) -> None:
    logs = [node_log(tmp_path, f"node{i}.log", "300.0", TIMED_OUT, pid=2183 + i) for i in (0, 1)]
    found = diagnose(logs)[0]
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "different --nnodes" in found.explanation and "--nnodes" in found.fix


def test_a_barrier_the_masters_store_closed_under_is_no_failure(tmp_path: Path) -> None:
    found = diagnose([node_log(tmp_path, "node1.log", "0.014362573623657227", CLOSED)])[0]
    assert found.id == "no-failure"


def test_a_node_that_failed_beside_one_that_waited_is_the_failure(tmp_path: Path) -> None:
    waited = node_log(tmp_path, "node0.log", "300.0", TIMED_OUT)
    failed = tmp_path / "node1.log"
    failed.write_text("[default0]:Traceback (most recent call last):\n"
                      '[default0]:  File "train.py", line 9, in <module>\n'
                      "[default0]:KeyError: 'label'\n")
    found = diagnose([waited, str(failed)])[0]
    assert found.id == "rank-failed" and "KeyError" in found.explanation


@pytest.mark.parametrize("logs", [["node0.log"], ["node1.log"]])
def test_the_real_nodes_of_different_nnodes_each_waited(logs: list[str]) -> None:
    found = diagnose([str(FIXTURES / "torchrun-sim" / "nnodes" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("stopped-while-waiting", "error")


def test_the_real_nodes_of_different_nnodes_together_read_as_it() -> None:
    found = diagnose([str(FIXTURES / "torchrun-sim" / "nnodes" / f"node{i}.log")
                      for i in (0, 1)])[0]
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "different --nnodes" in found.explanation


def test_the_real_race_at_the_barrier_after_a_job_that_passed_is_no_failure() -> None:
    found = diagnose([str(FIXTURES / "captured" / "torchrun_exit_barrier_race_node1.log")])[0]
    assert found.id == "no-failure"
