"""The job-wide progress counter: retried until it first connects, never reconnected after."""

from __future__ import annotations

import threading
import time
from typing import Any

from ddpkit.launch.hang.progress_exchange import ProgressExchange
from ddpkit.launch.store_client import Connected


class Store:
    """A store client whose ``add`` works ``works`` times, then fails as a closed store does."""

    def __init__(self, works: int) -> None:
        self.works, self.total, self.calls = works, 0, 0

    def add(self, key: str, delta: int) -> int:
        self.calls += 1
        if self.calls > self.works:
            raise RuntimeError("Failed to recv, got 0 bytes. Connection was likely closed.")
        self.total += delta
        return self.total


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


def test_it_retries_until_the_store_is_up_and_counts_progress() -> None:
    store = Store(works=1000)
    connector = Connector([None, None, store])
    exchange = ProgressExchange("10.0.0.2", 29500, interval=0.01, connector=connector)
    exchange.progressed()
    _until(lambda: exchange.value() == 1)
    exchange.close()
    assert connector.calls == 3 and exchange.connections == 1 and exchange.ended is None


def test_a_store_that_went_away_is_never_reconnected() -> None:
    connector = Connector([Store(works=3), Store(works=1000)])
    exchange = ProgressExchange("10.0.0.2", 29500, interval=0.01, connector=connector)
    _until(lambda: exchange.ended is not None)
    time.sleep(0.1)  # ten more intervals: still no second client
    exchange.close()
    assert connector.calls == 1 and exchange.connections == 1
    assert exchange.value() == 0 and "went away" in (exchange.ended or "")


def test_stop_makes_no_further_store_call() -> None:
    store = Store(works=1000)
    exchange = ProgressExchange("10.0.0.2", 29500, interval=0.01, connector=Connector([store]))
    _until(lambda: store.calls >= 2)
    exchange.stop()
    time.sleep(0.05)  # a call in flight may end
    calls = store.calls
    time.sleep(0.1)
    assert store.calls == calls
    exchange.close()
