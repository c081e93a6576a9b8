"""Issue 11's attacks on the join store, re-run against a real c10d TCPStore on loopback.

The attacker is a plain ``torch.distributed.TCPStore`` client that knows the address and port (and,
by listing keys, the run id) but not the token's secret.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from ddpkit.errors import DeadlineExceeded, JobFailed
from ddpkit.launch.job import JobSpec
from ddpkit.launch.join import sides as join
from ddpkit.launch.join.store import JobStore, connect_store, host_store
from ddpkit.launch.join.tokens import new_token
from ddpkit.launch.join.worker import WorkerSide

pytest.importorskip("torch")

SECRET_VALUE = "hf_Sup3rS3cretApiKeyValue"


def _spec(nnodes: int = 3) -> join.JoinJob:
    job = JobSpec(command="launch", nnodes=nnodes, overrides=(("WANDB_API_KEY", SECRET_VALUE),),
                  entry=("train.py",))
    return join.JoinJob(job=job, master_addr="127.0.0.1", env={"HF_TOKEN": SECRET_VALUE},
                        join_timeout=5, ddpkit_version="x")


@pytest.fixture
def master(tcp_port: int) -> Iterator[tuple[join.MasterSide, list[str]]]:
    reported: list[str] = []
    store = host_store(new_token("127.0.0.1", tcp_port),
                       on_reject=lambda name, why: reported.append(name))
    side = join.MasterSide(store, _spec())
    side.publish()
    yield side, reported
    del side, store


def _attacker(store: JobStore) -> Any:
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    return TCPStore("127.0.0.1", store.token.port, None, False, datetime.timedelta(seconds=10))


def _worker(store: JobStore) -> WorkerSide:
    return WorkerSide(connect_store(store.token, timeout=10))


@pytest.mark.timeout(60)
def test_the_store_listens_on_the_chosen_address_only(master: tuple[join.MasterSide, list[str]]
                                                      ) -> None:
    port = master[0].store.token.port
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    with pytest.raises(ConnectionRefusedError):  # another address of this machine
        socket.create_connection(("127.0.0.2", port), timeout=5).close()


@pytest.mark.timeout(60)
def test_reading_every_key_without_the_secret_shows_no_job_and_no_secret(
        master: tuple[join.MasterSide, list[str]]) -> None:
    side, _ = master
    worker = _worker(side.store)
    worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1")
    attacker = _attacker(side.store)
    keys = list(attacker.list_keys())
    assert side.store.token.key(join.JOB) in keys
    everything = b"".join(bytes(attacker.get(key)) for key in keys)
    for clear in (SECRET_VALUE, "HF_TOKEN", "WANDB_API_KEY", "train.py", "10.0.0.3",
                  side.store.token.secret):
        assert clear.encode() not in everything


@pytest.mark.timeout(60)
def test_garbage_under_every_key_the_master_reads_is_ignored_counted_and_reported(
        master: tuple[join.MasterSide, list[str]]) -> None:
    side, reported = master
    attacker = _attacker(side.store)
    for name in (join.node_key(1), join.alive_key(1), join.done_key(1), join.STOP, join.GO):
        attacker.set(side.store.token.key(name), b'{"v": 2, "n": "AAAAAAAAAAAAAAAA", "c": "AAAA"}')
    attacker.set(side.store.token.key(join.node_key(2)), b"\x80not json at all")
    with pytest.raises(DeadlineExceeded) as caught:  # not token-rejected: the master keeps going
        side.wait_for_nodes(lambda node: None, timeout=1.0)
    assert caught.value.error_id == "nodes-missing"
    assert side.should_stop() is None
    assert {join.node_key(1), join.node_key(2)} <= set(reported)
    assert side.store.rejected[join.node_key(1)] == 1  # once: the junk is emptied after one read
    assert bytes(attacker.get(side.store.token.key(join.node_key(1)))) == b""
    worker = _worker(side.store)  # a real worker takes the slot the junk sat in
    assert worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1") == 1


@pytest.mark.timeout(60)
def test_a_value_replayed_under_another_key_is_ignored(master: tuple[join.MasterSide, list[str]]
                                                       ) -> None:
    side, _ = master
    worker = _worker(side.store)
    worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1")
    attacker = _attacker(side.store)
    token = side.store.token
    attacker.set(token.key(join.node_key(2)), attacker.get(token.key(join.node_key(1))))
    with pytest.raises(DeadlineExceeded):
        side.wait_for_nodes(lambda node: None, timeout=1.0)
    assert sorted(side.joined) == [1] and side.store.rejected.get(join.node_key(2)) == 1


@pytest.mark.timeout(60)
def test_bumping_a_counter_does_not_lock_a_worker_out(master: tuple[join.MasterSide, list[str]]
                                                      ) -> None:
    side, _ = master
    attacker = _attacker(side.store)
    attacker.add(side.store.token.key("joined"), 5)  # what took every rank before
    worker = _worker(side.store)
    assert worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1") == 1


@pytest.mark.timeout(60)
def test_a_displaced_claim_is_noticed_by_the_node_that_lost_it(
        master: tuple[join.MasterSide, list[str]]) -> None:
    side, _ = master
    first = _worker(side.store)
    assert first.claim_rank(first.fetch_job(), "node1", "10.0.0.3", "eth1") == 1
    _attacker(side.store).set(side.store.token.key(join.node_key(1)), b"junk")
    second, third = _worker(side.store), _worker(side.store)
    assert second.claim_rank(second.fetch_job(), "node2", "10.0.0.4", "eth1") == 1
    assert third.claim_rank(third.fetch_job(), "node3", "10.0.0.5", "eth1") == 2
    side.wait_for_nodes(lambda node: None, timeout=5)
    side.release()
    second.wait_for_go(timeout=5)
    with pytest.raises(JobFailed) as caught:
        first.wait_for_go(timeout=5)
    assert caught.value.error_id == "rank-taken"


@pytest.mark.timeout(120)
def test_flooding_the_store_is_swept_and_a_huge_value_is_refused(
        master: tuple[join.MasterSide, list[str]]) -> None:
    side, reported = master
    attacker = _attacker(side.store)
    token = side.store.token
    blob = b"x" * (8 << 20)
    for i in range(24):  # 192 MiB under keys the job never writes
        attacker.set(f"flood/{i}", blob)
    attacker.set(token.key(join.node_key(1)), blob)  # and a huge value under one it reads
    with pytest.raises(DeadlineExceeded):
        side.wait_for_nodes(lambda node: None, timeout=1.0)
    assert side.store.removed >= 24 and side.store.key_count() <= len(side.names())
    assert join.node_key(1) in reported
    assert bytes(attacker.get(token.key(join.node_key(1)))) == b""
    report = side.store_report()
    assert report["removed_keys"] >= 24 and report["rejected"][join.node_key(1)] == 1
    assert side.store.read(join.JOB) is not None  # the job itself survived the sweep


DEEP = b"[" * 200_000  # issue 22: under the size cap, and RecursionError in json.loads


@pytest.mark.timeout(60)
def test_a_deeply_nested_value_under_every_key_the_master_reads_is_ignored(
        master: tuple[join.MasterSide, list[str]]) -> None:
    side, reported = master
    attacker = _attacker(side.store)
    worker = _worker(side.store)
    assert worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1") == 1
    with pytest.raises(DeadlineExceeded):
        side.wait_for_nodes(lambda node: None, timeout=0.3)
    for name in (join.node_key(1), join.node_key(2), join.alive_key(1), join.done_key(1),
                 join.STOP, join.JOB):
        attacker.set(side.store.token.key(name), DEEP)
    with pytest.raises(DeadlineExceeded):  # the master goes on waiting for node 2
        side.wait_for_nodes(lambda node: None, timeout=1.0)
    assert side.should_stop() is None and side.store.read(join.STOP) is None
    assert {join.node_key(1), join.node_key(2), join.JOB} <= set(reported)
    assert sorted(side.joined) == [1]  # the joined node kept its place
    worker.keep_claim()
    assert side.store.read(join.node_key(1)) is not None and worker.rank == 1
    assert side.store.read(join.JOB) is not None  # the master put the spoiled job back
    later = _worker(side.store)
    assert later.claim_rank(later.fetch_job(), "node2", "10.0.0.4", "eth1") == 2


@pytest.mark.timeout(60)
def test_rewriting_a_claim_cannot_lock_its_node_out(master: tuple[join.MasterSide, list[str]]
                                                    ) -> None:
    side, _ = master
    first = _worker(side.store)
    assert first.claim_rank(first.fetch_job(), "node1", "10.0.0.3", "eth1") == 1
    _attacker(side.store).set(side.store.token.key(join.node_key(1)), b"junk")
    first.keep_claim()  # what its wait for the go does every 0.2 s: the same claim goes back
    assert first.rank == 1
    _attacker(side.store).set(side.store.token.key(join.node_key(1)), b"junk")
    second = _worker(side.store)  # ... and if a real worker took the emptied slot meanwhile
    assert second.claim_rank(second.fetch_job(), "node2", "10.0.0.4", "eth1") == 1
    first.keep_claim()
    assert first.rank == 2
    side.wait_for_nodes(lambda node: None, timeout=5)
    side.release()
    first.wait_for_go(timeout=5)
    second.wait_for_go(timeout=5)
    assert (first.rank, second.rank) == (2, 1)
    assert {n.claim for n in side.joined.values()} == {first.claim, second.claim}


@pytest.mark.timeout(60)
def test_a_few_foreign_keys_are_swept_too(master: tuple[join.MasterSide, list[str]]) -> None:
    side, _ = master
    attacker = _attacker(side.store)
    attacker.set("flood/0", b"x" * (4 << 20))  # one key: far under the old threshold
    with pytest.raises(DeadlineExceeded):
        side.wait_for_nodes(lambda node: None, timeout=0.5)
    assert not attacker.check(["flood/0"]) and side.store.removed >= 1


@pytest.mark.timeout(60)
def test_a_tampered_job_is_repaired_or_named_as_tampering_without_the_run_id(
        master: tuple[join.MasterSide, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpkit.launch.join import worker as worker_module

    side, _ = master
    monkeypatch.setattr(worker_module, "SPOILED_RETRY_S", 0.5)
    _attacker(side.store).set(side.store.token.key(join.JOB), b"[[[[ not ours")
    with pytest.raises(JobFailed) as caught:  # nobody repairs it: the master is not polling
        _worker(side.store).fetch_job()
    assert caught.value.error_id == "job-store-tampered"
    shown = caught.value.message + caught.value.hint
    assert side.store.token.run_id not in shown and side.store.token.secret not in shown
    side.publish()  # what the master's wait does when it finds the job spoiled
    assert _worker(side.store).fetch_job().nnodes == 3
