"""Token mode against a real c10d TCPStore on loopback: ranks, signatures, liveness, stop orders."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from ddpkit.errors import DeadlineExceeded, JobFailed, NetworkProblem
from ddpkit.launch.job import Deadlines, JobSpec
from ddpkit.launch.join import sides as join
from ddpkit.launch.join.store import JobStore, connect_store, host_store
from ddpkit.launch.join.tokens import JoinToken, new_token
from ddpkit.launch.join.worker import WorkerSide
from ddpkit.launch.outcomes import FAILED, LOST, OK, NodeOutcome

pytest.importorskip("torch")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _spec(nnodes: int = 3) -> join.JoinJob:
    job = JobSpec(command="launch", nnodes=nnodes, deadlines=Deadlines(connect_timeout=30),
                  overrides=(("A", "1"),), entry=("train.py", "--lr", "0.1"))
    return join.JoinJob(job=job, master_addr="127.0.0.1", env={"NCCL_DEBUG": "INFO"},
                        join_timeout=5, ddpkit_version="x")


@pytest.fixture
def master_store(tcp_port: int) -> Iterator[JobStore]:
    store = host_store(new_token("127.0.0.1", tcp_port))
    yield store
    del store


def _worker(token: JoinToken) -> WorkerSide:
    return WorkerSide(connect_store(token, timeout=10))


@pytest.mark.timeout(60)
def test_a_worker_fetches_the_job_and_ranks_are_handed_out_once(master_store: JobStore) -> None:
    master = join.MasterSide(master_store, _spec(nnodes=4))
    master.publish()
    workers = [_worker(master_store.token) for _ in range(4)]
    assert workers[0].fetch_job() == _spec(nnodes=4)
    ranks: list[int] = []
    errors: list[str] = []

    def claim(worker: WorkerSide) -> None:
        try:
            ranks.append(worker.claim_rank(_spec(nnodes=4), "h", "10.0.0.9", "eth1"))
        except JobFailed as exc:
            errors.append(exc.error_id)

    threads = [threading.Thread(target=claim, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(ranks) == [1, 2, 3] and errors == ["job-full"]


@pytest.mark.timeout(60)
def test_a_token_with_another_secret_is_rejected(master_store: JobStore) -> None:
    join.MasterSide(master_store, _spec()).publish()
    token = master_store.token
    forged = JoinToken(token.address, token.port, token.run_id, "not-the-secret-at-all-000")
    with pytest.raises(JobFailed) as caught:
        _worker(forged).fetch_job()
    assert caught.value.error_id == "token-rejected"
    other_run = JoinToken(token.address, token.port, "ffffffffffff", token.secret)
    with pytest.raises(JobFailed) as caught:
        _worker(other_run).fetch_job()
    assert caught.value.error_id == "job-not-found"


@pytest.mark.timeout(60)
def test_the_store_holds_json_not_pickle(master_store: JobStore) -> None:
    join.MasterSide(master_store, _spec()).publish()
    raw = bytes(master_store.store.get(master_store.token.key(join.JOB)))
    assert set(json.loads(raw)) == {"v", "n", "c"}  # JSON, sealed: nothing of the job in clear
    assert b"train.py" not in raw and master_store.token.secret not in raw.decode()
    assert master_store.read(join.JOB) == _spec().to_dict()


@pytest.mark.timeout(60)
def test_joins_are_shown_and_a_missing_node_is_named(master_store: JobStore) -> None:
    master = join.MasterSide(master_store, _spec(nnodes=3))
    master.publish()
    worker = _worker(master_store.token)
    worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1")
    seen: list[str] = []
    with pytest.raises(DeadlineExceeded) as caught:
        master.wait_for_nodes(lambda node: seen.append(node.describe()), timeout=1.0)
    assert seen == ["node 1 joined from 10.0.0.3 (node1, via eth1)"]
    assert caught.value.error_id == "nodes-missing"
    assert "missing node rank(s) 2" in caught.value.message
    assert "joined: node 1 joined from 10.0.0.3" in caught.value.message


@pytest.mark.timeout(60)
def test_a_failure_reported_by_one_worker_stops_all(master_store: JobStore) -> None:
    master = join.MasterSide(master_store, _spec(nnodes=3))
    master.publish()
    one, two = _worker(master_store.token), _worker(master_store.token)
    for worker, host in ((one, "node1"), (two, "node2")):
        worker.claim_rank(worker.fetch_job(), host, "10.0.0.9", "eth1")
    master.wait_for_nodes(lambda node: None, timeout=5)
    master.release()
    two.wait_for_go(timeout=5)
    assert master.should_stop() is None and two.should_stop() is None
    assert two.rank is not None
    one.report(NodeOutcome(node_rank=one.rank or 0, host="node1", state=FAILED, rank=1, local_rank=0,
                           exitcode=-9, signal="SIGKILL"))
    two._last_poll = -1e9  # the next poll is not rate-limited
    assert two.should_stop() == "node 1 (node1) failed: killed by SIGKILL"
    master._last_poll = -1e9
    assert master.should_stop() == "node 1 (node1) failed: killed by SIGKILL"
    two.report(NodeOutcome(node_rank=two.rank, host="node2", state="stopped"))
    outcomes = master.collect(wait=5)
    assert [(o.node_rank, o.state) for o in outcomes] == [(1, FAILED), (2, "stopped")]


@pytest.mark.timeout(60)
def test_a_worker_whose_heartbeat_stops_is_lost(master_store: JobStore) -> None:
    clock = Clock()
    master = join.MasterSide(master_store, _spec(nnodes=2), clock=clock)
    master.publish()
    worker = _worker(master_store.token)
    worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1")
    master.wait_for_nodes(lambda node: None, timeout=5)
    worker.store.put(join.alive_key(1), {"n": 1})
    master.poll()
    clock.now += join.HEARTBEAT_LOST_S / 2
    assert master.should_stop() is None
    clock.now += join.HEARTBEAT_LOST_S
    reason = master.should_stop()
    assert reason is not None and "node 1 (node1) lost" in reason and "no heartbeat" in reason
    (outcome,) = master.collect(wait=0)
    assert outcome.state == LOST and outcome.host == "node1"


@pytest.mark.timeout(60)
def test_the_heartbeat_thread_beats_and_a_clean_finish_is_ok(master_store: JobStore) -> None:
    master = join.MasterSide(master_store, _spec(nnodes=2))
    master.publish()
    worker = _worker(master_store.token)
    worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1")
    lost: list[str] = []
    worker.start_heartbeat(lost.append)
    master.wait_for_nodes(lambda node: None, timeout=5)
    time.sleep(join.HEARTBEAT_S * 2.5)
    assert (master_store.read(join.alive_key(1)) or {}).get("n", 0) >= 2
    worker.report(NodeOutcome(node_rank=1, host="node1", state=OK))
    (outcome,) = master.collect(wait=5)
    assert outcome.state == OK and lost == []
    assert worker.stop_reason() is None, "a clean finish must not order a stop"


class _CutOff:
    """A store client on a dead link: writes "succeed" into the send buffer, round trips never
    come back (what torch's client does until the kernel's TCP retries give up, ~15 min)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def set(self, key: str, value: bytes) -> None:
        pass

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        self.release.wait(60)
        raise RuntimeError("Connection reset by peer")

    def clone(self) -> _CutOff:
        return self


@pytest.mark.timeout(60)
def test_a_worker_cut_off_from_the_master_says_so_within_the_deadline(
        master_store: JobStore) -> None:
    cut = _CutOff()
    store = JobStore(cut, master_store.token, call_timeout=1.0)
    worker = WorkerSide(store)
    worker.rank = 1
    lost: list[str] = []
    started = time.monotonic()
    worker.start_heartbeat(lost.append)
    while not lost:
        assert time.monotonic() - started < 10, "the heartbeat never noticed the dead link"
        time.sleep(0.05)
    assert "lost the job store" in lost[0] and "no answer within 1 s" in lost[0]
    assert worker.should_stop() == lost[0]  # answered from memory: no call on the dead link
    with pytest.raises(NetworkProblem) as caught:  # and every later call fails at once
        worker.report(NodeOutcome(node_rank=1, host="node1", state=FAILED))
    assert caught.value.error_id == "join-store-lost" and time.monotonic() - started < 10
    cut.release.set()


@pytest.mark.timeout(60)
def test_a_worker_whose_master_vanishes_before_the_go_fails_cleanly(tcp_port: int) -> None:
    store = host_store(new_token("127.0.0.1", tcp_port))
    join.MasterSide(store, _spec(nnodes=2)).publish()
    worker = WorkerSide(connect_store(store.token, timeout=10))
    worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1")
    del store  # the master's process ends: its store server goes with it
    with pytest.raises(NetworkProblem) as caught:  # not an internal error
        worker.wait_for_go(timeout=20)
    assert caught.value.error_id == "join-store-lost"
