"""Progress across the job's nodes, in its rendezvous store (torchrun's TCPStore on the master):
each node's hang watcher writes its own counter there when its own ranks progress, and reads the
other nodes' counters, so a node whose ranks wait for a rank computing on another node does not
call the job hung.

That store has no authentication, so what is read there is held to the job's own nodes:

- one key per node (``ddpkit/hang/progress/<node rank>``), only the job's node ranks are read, and
  a node's counter counts only when it goes *up* (a replayed old value never does);
- with a job key (token mode: a random key that travelled inside the sealed job), every value is
  sealed (:mod:`ddpkit.launch.sealed`): nobody without the key can write a counter that opens;
- without one (per-node and ``--hosts`` modes, whose nodes share no secret), the watcher lets
  peer progress hold a verdict off only for a bounded time (``HangPolicy.peer_hold_s``), so
  whoever bumps the counters can delay a hang report, never silence it;
- every value is parsed by :func:`ddpkit.launch.store_value.parse_json_dict` (bounded), every store
  call runs under a deadline (:func:`ddpkit.launch.store_client.within`).

All store traffic runs in a daemon thread; the watcher only reads the last value. Until the first
connection, a failure (the store not up yet) is retried. Once connected, the store lives exactly
as long as the job: torchrun's agent on the master hosts it and closes it when every node has
passed its exit barrier. So a call that fails after that means the job ended (or the master's
agent died): the exchange stops for good and never reconnects, and the watcher decides from its
own ranks, as on one node. The watcher also stops it (:meth:`ProgressExchange.stop`) as soon as
this node's ranks have ended, before the store can go away under a call in flight: each such
failure made torch's C++ client log a warning with a backtrace (``recvValue failed``), and each
reconnection to a closed port a retry block.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ddpkit.i18n import _
from ddpkit.launch.sealed import Sealer
from ddpkit.launch.store_client import Connected, connect, within
from ddpkit.launch.store_value import NotOurs, parse_json_dict

PREFIX = "ddpkit/hang/progress/"
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 5.0
PURPOSE = b"ddpkit hang-progress v1"


Connector = Callable[[str, int, float], Connected]


def bystander(address: str, port: int, deadline: float) -> Connected:
    """A client of torchrun's store that is never counted as a node (``wait_for_workers``)."""
    return connect(address, port, deadline, wait_for_workers=False)


def progress_key(node_rank: int) -> str:
    return f"{PREFIX}{node_rank}"


class PeerCounters:
    """Pure bookkeeping: the highest counter seen per node; :attr:`changes` goes up whenever one
    of them does (the value the watcher compares)."""

    def __init__(self, sealer: Sealer | None) -> None:
        self.sealer = sealer
        self.highest: dict[int, int] = {}
        self.changes = 0
        self.rejected = 0

    def encode(self, node_rank: int, count: int) -> bytes:
        body = {"n": count}
        if self.sealer is not None:
            return self.sealer.seal(progress_key(node_rank), body)
        return f'{{"n": {count}}}'.encode()

    def seen(self, node_rank: int, raw: bytes) -> None:
        try:
            value = (self.sealer.unseal(progress_key(node_rank), raw) if self.sealer is not None
                     else parse_json_dict(raw, most_bytes=256))
        except NotOurs:
            self.rejected += 1
            return
        count = value.get("n")
        if not isinstance(count, int) or isinstance(count, bool):
            self.rejected += 1
            return
        if count > self.highest.get(node_rank, 0):
            self.highest[node_rank] = count
            self.changes += 1


def _read(store: Any, key: str, absent: bytes) -> Callable[[], Any]:
    """One round trip that never waits for an absent key: ``absent`` comes back instead."""
    return lambda: store.compare_set(key, absent, absent)


class ProgressExchange:
    def __init__(self, address: str, port: int, *, node_rank: int, nnodes: int,
                 key: str = "", interval: float = 1.0, connector: Connector = bystander) -> None:
        self._connect = connector
        self.connections = 0  # clients made (one per job: never a reconnection)
        self.ended: str | None = None  # why the exchange stopped for good, once it has
        self.address, self.port, self.interval = address, port, interval
        self.node_rank, self.nnodes = node_rank, nnodes
        self.sealed = bool(key)
        self.counters = PeerCounters(Sealer(key, "hang", PURPOSE) if key else None)
        # os.urandom, not secrets: secrets imports hmac and hashlib on every launch's start
        self._absent = b"\x00ddpkit-absent-" + os.urandom(16).hex().encode()
        self._lock = threading.Lock()
        self._pending = False
        self._count = 0
        self._value: int | None = None
        self._stop = threading.Event()
        self._in_call = threading.Event()
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
        """No store call after the exchange in flight (if any); returns at once."""
        self._stop.set()

    def close(self) -> None:
        """Stop, and wait for the thread to drop its client (an exchange in flight is bounded:
        every call in it runs under a deadline): a thread left inside torch's C++ store client
        while the interpreter exits can block the exit."""
        self._stop.set()
        self._thread.join(timeout=CALL_TIMEOUT_S + 2 if self._in_call.is_set() else 1.0)

    def _exchange(self, store: Any) -> None:
        with self._lock:
            pending, self._pending = self._pending, False
        if pending:
            self._count += 1
            raw = self.counters.encode(self.node_rank, self._count)
            within(lambda: store.set(progress_key(self.node_rank), raw), CALL_TIMEOUT_S)
        absent = self._absent
        for node in range(self.nnodes):
            if node == self.node_rank:
                continue
            found = bytes(within(_read(store, progress_key(node), absent), CALL_TIMEOUT_S))
            if found != absent:
                self.counters.seen(node, found)
        with self._lock:
            self._value = self.counters.changes

    def _run(self) -> None:
        store: Any | None = None
        while not self._stop.is_set():
            if store is None:
                store = self._connect(self.address, self.port,
                                      time.monotonic() + CONNECT_TIMEOUT_S).store
                self.connections += store is not None
            if store is not None and not self._stop.is_set():
                self._in_call.set()
                try:
                    self._exchange(store)
                except Exception as exc:  # noqa: BLE001 - the store is gone: so is the job
                    self.ended = _("the job's store went away: {kind}",
                                   kind=type(exc).__name__)
                    break
                finally:
                    self._in_call.clear()
            self._stop.wait(self.interval)
        store = None  # closed here, in this thread, not at interpreter exit
        self._stop.set()
