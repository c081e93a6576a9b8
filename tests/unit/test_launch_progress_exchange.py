"""The hang watch's per-node progress counters (issue 22): sealed where the job has a key, only
rising counts count, and nothing written by someone else moves them."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ddpkit.launch.hang.progress_exchange import (
    PURPOSE,
    PeerCounters,
    ProgressExchange,
    progress_key,
)
from ddpkit.launch.sealed import Sealer
from ddpkit.launch.store_client import Connected

KEY = "0123456789abcdef0123456789abcdef"


def _sealer(key: str = KEY) -> Sealer:
    return Sealer(key, "hang", PURPOSE)


def test_sealed_counters_count_only_values_sealed_with_the_job_key_and_only_when_they_rise() -> None:
    mine, theirs = PeerCounters(_sealer()), PeerCounters(_sealer("f" * 32))
    first, second = mine.encode(1, 1), mine.encode(1, 2)
    mine.seen(1, first)
    mine.seen(1, second)
    assert mine.changes == 2
    mine.seen(1, first)  # a replayed older value
    mine.seen(1, second)  # the same value again
    mine.seen(2, second)  # moved to another node's key
    mine.seen(1, theirs.encode(1, 99))  # sealed with another key
    mine.seen(1, b'{"n": 1000}')  # plain JSON
    mine.seen(1, b"[" * 200_000)
    assert mine.changes == 2 and mine.rejected == 4


def test_unsealed_counters_still_ignore_junk_and_falling_values() -> None:
    counters = PeerCounters(None)
    for raw in (b'{"n": 3}', b'{"n": 2}', b'{"n": true}', b'{"n": "9"}', b"[" * 200_000,
                b'{"n": 4}'):
        counters.seen(1, raw)
    assert counters.changes == 2 and counters.highest == {1: 4}


@pytest.fixture
def store(tcp_port: int) -> Iterator[Any]:
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    server = TCPStore("127.0.0.1", tcp_port, None, True, datetime.timedelta(seconds=10),
                      wait_for_workers=False)
    yield server
    del server


@pytest.mark.timeout(60)
def test_two_nodes_see_each_others_progress_and_not_a_strangers(store: Any, tcp_port: int
                                                                ) -> None:
    pytest.importorskip("torch")
    nodes = [ProgressExchange("127.0.0.1", tcp_port, node_rank=r, nnodes=2, key=KEY,
                              interval=0.1) for r in (0, 1)]
    try:
        deadline = time.monotonic() + 30
        while nodes[1].value() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for count in range(1, 50):  # a stranger bumps node 0's key and writes junk
            store.set(progress_key(0), f'{{"n": {count}}}'.encode())
            store.set(progress_key(1), b"[" * 1000)
            time.sleep(0.01)
        time.sleep(0.5)
        assert nodes[1].value() == 0
        nodes[0].progressed()
        while nodes[1].value() == 0:
            assert time.monotonic() < deadline, "node 1 never saw node 0's progress"
            time.sleep(0.05)
        assert nodes[1].value() == 1
    finally:
        for node in nodes:
            node.close()


# -- issue 21: retried until it first connects, never reconnected after -------------------------

class FailingStore:
    """A store whose calls work ``works`` times, then fail as a closed store does; node 1's
    counter is already there (unsealed)."""

    def __init__(self, works: int) -> None:
        self.works, self.calls = works, 0
        self.values: dict[str, bytes] = {"ddpkit/hang/progress/1": b'{"n": 1}'}

    def _call(self) -> None:
        self.calls += 1
        if self.calls > self.works:
            raise RuntimeError("Failed to recv, got 0 bytes. Connection was likely closed.")

    def set(self, key: str, value: bytes) -> None:
        self._call()
        self.values[key] = value

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        self._call()
        return self.values.get(key, expected)


class Connector:
    def __init__(self, answers: list[Any]) -> None:
        self.answers, self.calls = answers, 0
        self.lock = threading.Lock()

    def __call__(self, address: str, port: int, deadline: float) -> Connected:
        with self.lock:
            self.calls += 1
            store = self.answers.pop(0) if self.answers else None
        return Connected(store, None if store is not None else "connection refused")


def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.01)


def _exchange(connector: Connector) -> ProgressExchange:
    return ProgressExchange("10.0.0.2", 29500, node_rank=0, nnodes=2, interval=0.01,
                            connector=connector)


def test_it_retries_until_the_store_is_up_and_reads_the_peers() -> None:
    store = FailingStore(works=1000)
    connector = Connector([None, None, store])
    exchange = _exchange(connector)
    exchange.progressed()
    _until(lambda: exchange.value() == 1)
    _until(lambda: "ddpkit/hang/progress/0" in store.values)
    exchange.close()
    assert connector.calls == 3 and exchange.connections == 1 and exchange.ended is None


def test_a_store_that_went_away_is_never_reconnected() -> None:
    connector = Connector([FailingStore(works=3), FailingStore(works=1000)])
    exchange = _exchange(connector)
    _until(lambda: exchange.ended is not None)
    time.sleep(0.1)  # ten more intervals: still no second client
    exchange.close()
    assert connector.calls == 1 and exchange.connections == 1
    assert "went away" in (exchange.ended or "")


def test_stop_makes_no_further_store_call() -> None:
    store = FailingStore(works=1000)
    exchange = _exchange(Connector([store]))
    _until(lambda: store.calls >= 2)
    exchange.stop()
    time.sleep(0.05)  # a call in flight may end
    calls = store.calls
    time.sleep(0.1)
    assert store.calls == calls
    exchange.close()
