"""Heartbeat replay (issue 32, item 2) against a real c10d TCPStore on loopback.

The attacker captured the sealed ``alive/1`` values a real worker wrote (a plain TCPStore
client, no secret), the worker is then cut off, and the attacker writes the captured values back
in turn. The master must count none of them and declare node 1 lost within 30 s of the cut-off.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ddpkit.launch.job import JobSpec
from ddpkit.launch.join import sides as join
from ddpkit.launch.join.store import JobStore, connect_store, host_store
from ddpkit.launch.join.tokens import new_token
from ddpkit.launch.join.worker import WorkerSide
from ddpkit.launch.outcomes import LOST

pytest.importorskip("torch")

LOST_WITHIN_S = 30.0  # issue 32's bound


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def master_store(tcp_port: int) -> Iterator[JobStore]:
    store = host_store(new_token("127.0.0.1", tcp_port))
    yield store
    del store


def _started(master_store: JobStore, clock: Clock) -> tuple[join.MasterSide, WorkerSide]:
    spec = join.JoinJob(job=JobSpec(command="launch", nnodes=2, entry=("train.py",)),
                        master_addr="127.0.0.1", join_timeout=5, ddpkit_version="x")
    master = join.MasterSide(master_store, spec, clock=clock)
    master.publish()
    worker = WorkerSide(connect_store(master_store.token, timeout=10))
    worker.claim_rank(worker.fetch_job(), "node1", "10.0.0.3", "eth1")
    master.wait_for_nodes(lambda node: None, timeout=5)
    master.release()
    return master, worker


def _attacker(store: JobStore) -> Any:
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    return TCPStore("127.0.0.1", store.token.port, None, False, datetime.timedelta(seconds=10))


def _poll(master: join.MasterSide, clock: Clock, seconds: float) -> None:
    clock.now += seconds
    master._last_poll = -1e9  # every call polls
    master.should_stop()


def _beat_for(master: join.MasterSide, clock: Clock, worker: WorkerSide, seconds: float,
              capture: Any, key: str) -> list[bytes]:
    """The real heartbeat thread runs while the master polls; the attacker copies every value."""
    captured: list[bytes] = []
    worker.start_heartbeat(lambda why: None)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(join.HEARTBEAT_S / 2)
        _poll(master, clock, join.HEARTBEAT_S / 2)
        raw = bytes(capture.get(key))
        if raw not in captured:
            captured.append(raw)
    worker.stop_beating()  # the cut-off: the real node writes nothing more
    return captured


@pytest.mark.timeout(120)
def test_replayed_heartbeats_do_not_keep_a_cut_off_node_alive(master_store: JobStore) -> None:
    clock = Clock()
    master, worker = _started(master_store, clock)
    attacker = _attacker(master_store)
    key = master_store.token.key(join.alive_key(1))
    captured = _beat_for(master, clock, worker, 3 * join.HEARTBEAT_S, attacker, key)
    assert len(captured) >= 2 and not master.lost, "the real heartbeat kept node 1 alive"
    time.sleep(2 * join.HEARTBEAT_S)  # the thread has stopped writing
    cut_off = clock.now
    while not master.lost:
        assert clock.now - cut_off < LOST_WITHIN_S, "replayed values kept node 1 alive"
        for raw in captured:  # the captured values, in turn, as in the audit
            if not master.lost:
                attacker.set(key, raw)
                _poll(master, clock, 0.5)
    # the last value the worker wrote may reach the master only now, and counts once
    assert clock.now - cut_off <= join.HEARTBEAT_LOST_S + 3.0
    outcome = master.lost[1]
    assert outcome.state == LOST and "no heartbeat" in outcome.message
    assert "replayed heartbeat" in outcome.message and master.stale_beats[1] > 0


@pytest.mark.timeout(120)
def test_a_held_back_heartbeat_buys_at_most_the_life_of_its_pulse(master_store: JobStore
                                                                   ) -> None:
    """An attacker on the path holds back values the worker wrote (higher counters the master
    never saw) and releases them one by one after the cut-off: each echoes a pulse the master
    issued before the cut-off, so they count only while that pulse is fresh."""
    clock = Clock()
    master, worker = _started(master_store, clock)
    pulse = master_store.read(join.PULSE)
    assert pulse is not None
    key = master_store.token.key(join.alive_key(1))
    sealed = [_sealed_beat(master_store, n, worker.claim, str(pulse["nonce"]))
              for n in range(100, 200)]
    cut_off = clock.now
    attacker = _attacker(master_store)
    for raw in sealed:
        attacker.set(key, raw)
        _poll(master, clock, 0.5)
        if master.lost:
            break
    assert master.lost, "held-back heartbeats kept node 1 alive"
    assert clock.now - cut_off <= 2 * join.HEARTBEAT_LOST_S + 1.0 < LOST_WITHIN_S


@pytest.mark.timeout(60)
def test_a_beat_of_another_claim_or_a_repeated_counter_is_silence(master_store: JobStore
                                                                   ) -> None:
    clock = Clock()
    master, worker = _started(master_store, clock)
    nonce = str((master_store.read(join.PULSE) or {})["nonce"])
    key = join.alive_key(1)
    master_store.put(key, {"n": 5, "claim": worker.claim, "pulse": nonce})
    _poll(master, clock, 1.0)
    assert master._beats[1][0] == 5  # a fresh beat counts
    for body in ({"n": 9, "claim": "someone-else", "pulse": nonce},
                 {"n": 4, "claim": worker.claim, "pulse": nonce},
                 {"n": 9, "claim": worker.claim, "pulse": "not-issued"},
                 {"n": True, "claim": worker.claim, "pulse": nonce}):
        master_store.put(key, body)
        _poll(master, clock, 1.0)
        assert master._beats[1][0] == 5, body
    assert master.stale_beats[1] == 4


def _sealed_beat(store: JobStore, count: int, claim: str, pulse: str) -> bytes:
    """What the worker would have written (the attacker only copies such values)."""
    from ddpkit.launch.join.tokens import seal

    return seal(store.token, join.alive_key(1), {"n": count, "claim": claim, "pulse": pulse})
