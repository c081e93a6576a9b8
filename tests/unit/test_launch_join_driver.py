"""Token mode's driver against a real job store on loopback: a worker thread joins with the
token the driver hands out (as `ddpkit join` does), node 0's own share is a stand-in, and the
driver's events are recorded."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ddpkit.errors import DdpkitError, JobFailed
from ddpkit.launch.envpass import PassedEnv
from ddpkit.launch.job import JobSpec
from ddpkit.launch.join import driver as join_driver
from ddpkit.launch.join.sides import JoinedNode
from ddpkit.launch.join.store import connect_store
from ddpkit.launch.join.tokens import JoinToken
from ddpkit.launch.join.worker import WorkerSide
from ddpkit.launch.outcomes import FAILED, OK, STOPPED, NodeOutcome
from ports import free_port

pytest.importorskip("torch")

WHERE = join_driver.StoreAddress("127.0.0.1", "lo", "loopback, for the test")
NodeScript = Callable[[WorkerSide], None]


class Recorder:
    def __init__(self) -> None:
        self.progress: list[str] = []
        self.warnings: list[str] = []
        self.tokens: list[tuple[JoinToken, int]] = []
        self.token_files: list[Path | None] = []
        self.joins: list[tuple[JoinedNode, int, int]] = []
        self.token_given = threading.Event()

    def waiting(self, message: str) -> None:
        self.progress.append(message)

    def warning(self, message: str) -> None:
        self.warnings.append(message)

    def token_ready(self, token: JoinToken, others: int, token_file: Path | None = None) -> None:
        self.tokens.append((token, others))
        self.token_files.append(token_file)
        self.token_given.set()

    def joined(self, node: JoinedNode, count: int, expected: int) -> None:
        self.joins.append((node, count, expected))


def _job(join_port: int, *, join_timeout: float = 30,
         token_file: Path | None = None) -> join_driver.JoinMasterJob:
    spec = JobSpec(command="launch", nnodes=2, master_port=free_port(),
                   entry=("train.py",))
    return join_driver.JoinMasterJob(job=spec, passed=PassedEnv(values={}, overrides=()), cwd="/w",
                                     where=WHERE, join_port=join_port, join_timeout=join_timeout,
                                     token_file=token_file)


@contextlib.contextmanager
def joined_worker(events: Recorder, script: NodeScript) -> Iterator[list[BaseException]]:
    """A worker that joins with the token the driver hands out, waits for the go, then runs
    ``script`` (which reports how it ended); what it raised is in the yielded list."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            assert events.token_given.wait(30), "the driver never handed out a token"
            worker = WorkerSide(connect_store(events.tokens[0][0], timeout=10))
            worker.claim_rank(worker.fetch_job(), "worker-host", "127.0.0.1", "lo")
            worker.start_heartbeat(on_lost=lambda why: None)
            worker.wait_for_go(timeout=30)
            script(worker)
        except BaseException as exc:  # the test thread reports it
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield errors
    thread.join(30)
    assert not thread.is_alive() and errors == []


def _until_stopped(worker: WorkerSide) -> str:
    deadline = time.monotonic() + 30
    while (reason := worker.stop_reason()) is None:
        assert time.monotonic() < deadline, "the worker was never told to stop"
        time.sleep(0.1)
    return reason


@pytest.mark.timeout(90)
def test_node_0s_failure_orders_every_worker_to_stop(tcp_port: int) -> None:
    events, seen = Recorder(), []

    def worker(side: WorkerSide) -> None:
        seen.append(_until_stopped(side))
        side.report(NodeOutcome(node_rank=1, host="worker-host", state=STOPPED, message="stopped"))

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        raise JobFailed("job-failed", "node 0: rank 0 failed first: exit code 3")

    with joined_worker(events, worker):
        result = join_driver.run(_job(tcp_port), events, own_part)
    assert seen == [f"node 0 ({socket.gethostname()}) failed: node 0: rank 0 failed first: "
                    "exit code 3"]
    assert isinstance(result.own_error, JobFailed) and not result.ok
    assert [o.state for o in result.outcomes] == [FAILED, STOPPED]
    assert result.first_failure is not None and result.first_failure.node_rank == 0
    assert events.progress == [f"job store on 127.0.0.1:{tcp_port} (lo: loopback, for the test)",
                               "waiting for 1 node to join (up to 30 s)"]
    assert [(t.address, t.port, others) for t, others in events.tokens] == \
        [("127.0.0.1", tcp_port, 1)]
    assert [(n.node_rank, n.host, count, expected) for n, count, expected in events.joins] == \
        [(1, "worker-host", 1, 1)]
    payload = result.payload()
    assert payload["ok"] is False and payload["mode"] == "join"
    assert payload["master"] == {"address": "127.0.0.1", "interface": "lo",
                                 "reason": "loopback, for the test"}
    assert events.warnings == []


@pytest.mark.timeout(90)
def test_a_workers_failure_reaches_node_0_through_should_stop(tcp_port: int) -> None:
    events = Recorder()

    def worker(side: WorkerSide) -> None:
        side.report(NodeOutcome(node_rank=1, host="worker-host", state=FAILED, rank=1,
                                local_rank=0, exitcode=3, error_id="job-failed",
                                message="rank 1 failed first: exit code 3"))

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        deadline = time.monotonic() + 30
        while (reason := should_stop()) is None:
            assert time.monotonic() < deadline, "node 0 never heard of the worker's failure"
            time.sleep(0.1)
        return 6, NodeOutcome(node_rank=0, host="master-host", state=STOPPED, message=reason)

    with joined_worker(events, worker):
        result = join_driver.run(_job(tcp_port), events, own_part)
    assert result.own_error is None and result.own_code == 6
    assert [o.state for o in result.outcomes] == [STOPPED, FAILED]
    assert result.outcomes[0].message == "node 1 (worker-host) failed: exit code 3"
    first = result.first_failure
    assert first is not None and (first.node_rank, first.rank) == (1, 1)


@pytest.mark.timeout(90)
def test_every_node_finishing_well_is_an_ok_result(tcp_port: int) -> None:
    events = Recorder()

    def worker(side: WorkerSide) -> None:
        side.report(NodeOutcome(node_rank=1, host="worker-host", state=OK))

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        return 0, NodeOutcome(node_rank=0, host="master-host", state=OK)

    with joined_worker(events, worker):
        result = join_driver.run(_job(tcp_port), events, own_part)
    assert result.ok and result.own_code == 0
    assert [o.state for o in result.outcomes] == [OK, OK]
    assert result.payload()["first_failure"] is None and result.payload()["stacks"] is None


@pytest.mark.timeout(90)
def test_an_interrupt_in_node_0s_share_stops_every_worker_then_is_raised(tcp_port: int) -> None:
    events, seen, guarded = Recorder(), [], []

    def worker(side: WorkerSide) -> None:
        seen.append(_until_stopped(side))
        side.report(NodeOutcome(node_rank=1, host="worker-host", state=STOPPED))

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        raise KeyboardInterrupt

    def guard(announce: Callable[[], None]) -> contextlib.AbstractContextManager[None]:
        guarded.append(announce)
        return contextlib.nullcontext()

    with joined_worker(events, worker), pytest.raises(KeyboardInterrupt):
        join_driver.run(_job(tcp_port), events, own_part, interrupt_guard=guard)
    assert seen == ["interrupted on the master"] and len(guarded) == 1


@pytest.mark.timeout(60)
def test_a_node_that_never_joins_is_named_after_the_token_file_is_written(
        tcp_port: int, tmp_path: Path) -> None:
    events = Recorder()

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        raise AssertionError("node 0's share ran although a node never joined")

    token_file = tmp_path / "token"
    with pytest.raises(DdpkitError) as raised:
        join_driver.run(_job(tcp_port, join_timeout=1, token_file=token_file), events, own_part)
    assert raised.value.error_id == "nodes-missing"
    assert "missing node rank(s) 1" in raised.value.message
    assert token_file.read_text() == f"{events.tokens[0][0]}\n"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert events.token_files == [token_file]  # written before the front end is told


def test_with_a_token_file_the_printed_line_holds_no_secret(tmp_path: Path) -> None:
    import io

    from ddpkit.cli.job.job_events import JobConsoleEvents
    from ddpkit.cli.output.console import Console
    from ddpkit.launch.join.tokens import new_token

    token = new_token("10.0.0.2", 29400)
    shown = {}
    for name, file in (("plain", None), ("file", tmp_path / "token")):
        err = io.StringIO()
        JobConsoleEvents(Console(out=io.StringIO(), err=err, color=False)).token_ready(
            token, 1, file)
        shown[name] = err.getvalue()
    assert f"ddpkit join {token}" in shown["plain"]  # no file: the line is the only way
    assert token.secret not in shown["file"] and token.run_id not in shown["file"]
    assert f"ddpkit join --token-file {tmp_path / 'token'}" in shown["file"]
    assert "10.0.0.2:29400" in shown["file"]


def test_the_stored_job_leaves_the_interface_to_each_node_and_carries_the_env() -> None:
    job = join_driver.JoinMasterJob(
        job=JobSpec(command="test", nnodes=3, ifname="eth1"), cwd="/w", where=WHERE,
        passed=PassedEnv(values={"NCCL_DEBUG": "INFO"}, overrides=(("A", "1"),)))
    spec = join_driver.join_job(job)
    assert spec.job.ifname is None and spec.job.overrides == (("A", "1"),)
    assert (spec.master_addr, spec.env, spec.cwd) == ("127.0.0.1", {"NCCL_DEBUG": "INFO"}, "/w")
    shown = join_driver.shown_job(spec)
    assert shown["node1_argv"][:2] == ["ddpkit", "test"] and "--env" not in shown["node1_argv"]


@pytest.mark.timeout(60)
def test_the_master_says_every_few_seconds_whom_it_still_waits_for(
        tcp_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(join_driver, "WAIT_LINE_EVERY_S", 0.5)  # 10 s in real use
    events = Recorder()

    def own_part(should_stop: Callable[[], str | None]) -> tuple[int, NodeOutcome]:
        raise AssertionError("node 0's share ran although a node never joined")

    with pytest.raises(DdpkitError):
        join_driver.run(_job(tcp_port, join_timeout=1.6), events, own_part)
    lines = [p for p in events.progress if p.startswith("still waiting")]
    assert 2 <= len(lines) <= 4, events.progress
    assert lines[0].startswith("still waiting for 1 node to join (node rank 1): ")
    assert lines[0].endswith("s of --join-timeout 1.6 s")


def test_node_0s_ranks_get_the_ddpkit_env_values_every_worker_gets(tmp_path: Path) -> None:
    """Issue 22: in token mode node 0 ran with its shell's environment only."""
    from ddpkit.launch.envpass import load_env_file, passed_env

    (tmp_path / ".ddpkit_env").write_text("WANDB_PROJECT=demo\nNCCL_DEBUG=WARN\n")
    shell = {"PATH": "/usr/bin", "NCCL_DEBUG": "INFO"}
    loaded = load_env_file(tmp_path / ".ddpkit_env", required=True)
    assert loaded is not None
    passed = passed_env(shell, file_values=loaded.values, file_path=str(tmp_path / ".ddpkit_env"),
                        overrides=())
    job = join_driver.JoinMasterJob(job=JobSpec(command="launch", nnodes=2, entry=("t.py",)),
                                    passed=passed, cwd=str(tmp_path), where=WHERE)
    node0 = join_driver.own_env(job, shell)
    worker = {"PATH": "/bin", **join_driver.join_job(job).env}  # what `ddpkit join` runs with
    assert node0["WANDB_PROJECT"] == worker["WANDB_PROJECT"] == "demo"
    assert node0["NCCL_DEBUG"] == worker["NCCL_DEBUG"]
    assert node0["PATH"] == "/usr/bin"


def test_the_progress_key_travels_in_the_sealed_job_and_is_never_shown() -> None:
    import json

    job = _job(29400)
    spec = join_driver.join_job(job)
    assert len(job.progress_key) == 32 and spec.progress_key == job.progress_key
    assert type(spec).from_dict(spec.to_dict()).progress_key == job.progress_key
    assert job.progress_key not in json.dumps(join_driver.shown_job(spec))
    assert job.progress_key not in repr(spec) + repr(job)
    assert _job(29400).progress_key != job.progress_key  # one per job
