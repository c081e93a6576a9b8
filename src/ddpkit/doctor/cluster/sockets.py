"""I/O: the echo listener every node runs, and the probes every node makes (stdlib sockets only).

The listener accepts a TCP connection and answers with one line of JSON naming its node (rank and
the run's nonce) and the source address it saw, then closes. A probe binds to the source address
of the interface it means to use, connects with a short timeout, reads that line and hands it to
:func:`ddpkit.doctor.cluster.matrix.classify_answer`. All probes run in parallel threads under one
deadline; every socket has its own timeout, so nothing here can hang.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from types import TracebackType

from ddpkit.doctor.cluster.matrix import (
    ANSWER_LIMIT,
    ProbeTarget,
    classify_answer,
    classify_error,
    echo_line,
    result_for,
)
from ddpkit.doctor.cluster.model import PathResult

CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 2.0
PROBE_PHASE_S = 5.0
MAX_PROBE_THREADS = 64
_POLL_S = 0.2


class EchoListener:
    """One listening socket for every address of this node (dual-stack where IPv6 works).

    ``host`` binds one address instead (tests on loopback). Use as a context manager, or call
    :meth:`start` and :meth:`close`.
    """

    def __init__(self, rank: int, nonce: str, host: str | None = None) -> None:
        self.rank = rank
        self.nonce = nonce
        self.host = host
        self.answered = 0
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[tuple[str, int], ...]:
        """Listen and serve in a background thread; returns ``((family, port), ...)``."""
        self._sock, ports = self._open()
        self._thread = threading.Thread(target=self._serve, name="ddpkit-doctor-echo",
                                        daemon=True)
        self._thread.start()
        return ports

    def _open(self) -> tuple[socket.socket, tuple[tuple[str, int], ...]]:
        if self.host is not None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.bind((self.host, 0))
            sock.listen(128)
            name = "ipv6" if family == socket.AF_INET6 else "ipv4"
            return sock, ((name, int(sock.getsockname()[1])),)
        try:
            sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                sock.bind(("::", 0))
            except OSError:
                sock.close()
                raise
        except OSError:  # no IPv6 in this network namespace: IPv4 only
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("0.0.0.0", 0))
            sock.listen(128)
            return sock, (("ipv4", int(sock.getsockname()[1])),)
        sock.listen(128)
        port = int(sock.getsockname()[1])
        return sock, (("ipv4", port), ("ipv6", port))

    def _serve(self) -> None:
        assert self._sock is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not selector.select(_POLL_S):
                    continue
                try:
                    conn, peer = self._sock.accept()
                except OSError:
                    continue
                with contextlib.suppress(OSError), conn:
                    conn.settimeout(1.0)
                    self.answered += 1  # before the answer leaves: a prober that has it sees it
                    conn.sendall(echo_line(self.rank, self.nonce, str(peer[0])))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> EchoListener:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def probe(me: int, target: ProbeTarget, nonces: Mapping[str, int], *,
          connect_timeout: float = CONNECT_TIMEOUT_S,
          answer_timeout: float = ANSWER_TIMEOUT_S) -> PathResult:
    """Dial ``target`` from its source address and classify what happened."""
    family = socket.AF_INET6 if target.source.family == "ipv6" else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(connect_timeout)
            sock.bind((target.source.address, 0))
            sock.connect((target.target.address, target.port))
            sock.settimeout(answer_timeout)
            answer = b""
            while b"\n" not in answer and len(answer) < ANSWER_LIMIT:
                chunk = sock.recv(ANSWER_LIMIT)
                if not chunk:
                    break
                answer += chunk
    except TimeoutError:
        return classify_error(me, target, None, True)
    except OSError as exc:
        return classify_error(me, target, exc.errno, False, exc.strerror or str(exc))
    return classify_answer(me, target, answer, nonces)


def probe_all(me: int, targets: Sequence[ProbeTarget], nonces: Mapping[str, int], *,
              phase_s: float = PROBE_PHASE_S, connect_timeout: float = CONNECT_TIMEOUT_S,
              answer_timeout: float = ANSWER_TIMEOUT_S) -> tuple[PathResult, ...]:
    """Every probe at once, in threads; whatever has not finished after ``phase_s`` is a timeout."""
    if not targets:
        return ()
    pool = ThreadPoolExecutor(max_workers=min(MAX_PROBE_THREADS, len(targets)),
                              thread_name_prefix="ddpkit-doctor-probe")
    futures: list[Future[PathResult]] = [
        pool.submit(probe, me, target, nonces, connect_timeout=connect_timeout,
                    answer_timeout=answer_timeout) for target in targets]
    started = time.monotonic()
    wait_futures(futures, timeout=phase_s)
    pool.shutdown(wait=False, cancel_futures=True)
    results = []
    for target, future in zip(targets, futures, strict=True):
        if future.done() and not future.cancelled():
            error = future.exception()
            results.append(future.result() if error is None else result_for(
                me, target, "error", f"{type(error).__name__}: {error}"))
        else:
            waited = time.monotonic() - started
            results.append(result_for(me, target, "timeout",
                                      f"the probe phase ended after {waited:.1f} s"))
    return tuple(results)
