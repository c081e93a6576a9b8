"""One progress counter for the whole job, in its rendezvous store (torchrun's TCPStore on the
master): each node's hang watcher adds to it when its own ranks progress and reads it back, so a
node whose ranks wait for a rank computing on another node does not call the job hung.

All store traffic runs in a daemon thread (a store call can block for its timeout); the watcher
only reads the last value. Any failure (the store not up yet, or gone at the end) leaves the last
value in place: the watcher then decides from its own ranks, as on one node.
"""

from __future__ import annotations

import threading
import time

from ddpkit.launch.store_client import connect

KEY = "ddpkit/hang/progress"
CONNECT_TIMEOUT_S = 5.0


class ProgressExchange:
    def __init__(self, address: str, port: int, *, interval: float = 1.0) -> None:
        self.address, self.port, self.interval = address, port, interval
        self._lock = threading.Lock()
        self._pending = False
        self._value: int | None = None
        self._stop = threading.Event()
        self._in_call = threading.Event()  # inside a store call (bounded by the store's timeout)
        self._thread = threading.Thread(target=self._run, name="ddpkit-progress", daemon=True)
        self._thread.start()

    def progressed(self) -> None:
        """This node's ranks progressed: count it at the next exchange."""
        with self._lock:
            self._pending = True

    def value(self) -> int | None:
        with self._lock:
            return self._value

    def close(self) -> None:
        """Stop, and wait for a store call in flight (bounded by the store's own timeout): a
        thread left inside torch's C++ store client while the interpreter exits can block the
        exit."""
        self._stop.set()
        if self._in_call.is_set():
            self._thread.join(timeout=CONNECT_TIMEOUT_S + 2)

    def _run(self) -> None:
        store = None
        while not self._stop.is_set():
            if store is None:
                store = connect(self.address, self.port, time.monotonic() + CONNECT_TIMEOUT_S,
                                wait_for_workers=False).store  # never counted as a node
            if store is not None:
                with self._lock:
                    delta, self._pending = int(self._pending), False
                self._in_call.set()
                try:
                    value = int(store.add(KEY, delta))
                except Exception:  # noqa: BLE001 - any store failure: reconnect next time
                    store = None
                else:
                    with self._lock:
                        self._value = value
                finally:
                    self._in_call.clear()
            self._stop.wait(self.interval)
        store = None  # closed here, in this thread, not at interpreter exit
