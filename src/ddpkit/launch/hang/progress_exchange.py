"""One progress counter for the whole job, in its rendezvous store (torchrun's TCPStore on the
master): each node's hang watcher adds to it when its own ranks progress and reads it back, so a
node whose ranks wait for a rank computing on another node does not call the job hung.

All store traffic runs in a daemon thread (a store call can block for its timeout); the watcher
only reads the last value. Until the first connection, a failure (the store not up yet) is
retried. Once connected, the store lives exactly as long as the job: torchrun's agent on the
master hosts it and closes it when every node has passed its exit barrier. So a call that fails
after that means the job ended (or the master's agent died): the exchange stops for good and never
reconnects, and the watcher decides from its own ranks, as on one node. The watcher also stops it
(:meth:`ProgressExchange.stop`) as soon as this node's ranks have ended, before the store can go
away under a call in flight: each such failure made torch's C++ client log a warning with a
backtrace (``recvValue failed``), and each reconnection to a closed port a retry block.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ddpkit.launch.store_client import Connected, connect

KEY = "ddpkit/hang/progress"
CONNECT_TIMEOUT_S = 5.0

Connector = Callable[[str, int, float], Connected]


def bystander(address: str, port: int, deadline: float) -> Connected:
    """A client of torchrun's store that is never counted as a node (``wait_for_workers``)."""
    return connect(address, port, deadline, wait_for_workers=False)


class ProgressExchange:
    def __init__(self, address: str, port: int, *, interval: float = 1.0,
                 connector: Connector = bystander) -> None:
        self.address, self.port, self.interval = address, port, interval
        self._connect = connector
        self._lock = threading.Lock()
        self._pending = False
        self._value: int | None = None
        self.connections = 0  # clients made (one per job: never a reconnection)
        self.ended: str | None = None  # why the exchange stopped for good, once it has
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

    def stop(self) -> None:
        """No store call after the one in flight (if any); returns at once."""
        self._stop.set()

    def close(self) -> None:
        """Stop, and wait for the thread to drop its client (a store call in flight is bounded
        by the store's own timeout): a thread left inside torch's C++ store client while the
        interpreter exits can block the exit."""
        self._stop.set()
        self._thread.join(timeout=CONNECT_TIMEOUT_S + 2 if self._in_call.is_set() else 1.0)

    def _run(self) -> None:
        store: Any | None = None
        while not self._stop.is_set():
            if store is None:
                store = self._connect(self.address, self.port,
                                      time.monotonic() + CONNECT_TIMEOUT_S).store
                self.connections += store is not None
            if store is not None and not self._stop.is_set():
                with self._lock:
                    delta, self._pending = int(self._pending), False
                self._in_call.set()
                try:
                    value = int(store.add(KEY, delta))
                except Exception as exc:  # noqa: BLE001 - the store is gone: so is the job
                    self.ended = f"the job's store went away: {type(exc).__name__}"
                    break
                else:
                    with self._lock:
                        self._value = value
                finally:
                    self._in_call.clear()
            self._stop.wait(self.interval)
        self._stop.set()
        store = None  # closed here, in this thread, not at interpreter exit
