"""Raw TCP throughput between two addresses: what the wire gives, to put next to every busbw.

Standard library only (worker programs import it). One measurement is a sender opening ``streams``
TCP connections to a :class:`Receiver` and writing for at most ``seconds`` and at most ``max_bytes``
in all; the receiver counts what arrives on each connection and times it on its own clock (first
byte to last byte), and when a sender closes its side the receiver answers with those three numbers.
The rate is the bytes received over the span from the first byte of any stream to the last byte of
any stream - receiver-side, so data still sitting in socket buffers never counts.

Wire format: the sender opens with a 16-byte header (magic ``DDPK``, version, stream count,
a test id); the reply is ``!QQQ`` = bytes received, first-byte and last-byte ``monotonic_ns``.

The schedule of a whole-cluster run (:func:`pair_rounds`) is pure: every ordered node pair once,
rounds of disjoint pairs so one node never sends or receives twice at the same time.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

MAGIC = b"DDPK"
VERSION = 1
_HEADER = struct.Struct("!4sHH8s")  # magic, version, streams, test id
_REPLY = struct.Struct("!QQQ")  # bytes, first byte ns, last byte ns (receiver's monotonic clock)
CHUNK = 256 * 1024
DEFAULT_IO_TIMEOUT = 15.0


@dataclass(frozen=True)
class StreamReport:
    """What the receiver saw on one connection."""

    nbytes: int
    first_ns: int
    last_ns: int


@dataclass(frozen=True)
class Measurement:
    streams: int
    nbytes: int  # received, all streams
    seconds: float  # receiver-side span, first byte of any stream to last byte of any
    bytes_per_s: float | None  # None when nothing arrived
    error: str | None = None  # why the measurement failed (connect refused, timeout...)

    def to_dict(self) -> dict[str, object]:
        return {"streams": self.streams, "bytes": self.nbytes, "seconds": self.seconds,
                "bytes_per_s": self.bytes_per_s, "error": self.error}


def aggregate(streams: int, reports: Sequence[StreamReport]) -> Measurement:
    """Combine per-connection receiver reports into one rate (bytes over the receiver's span)."""
    nbytes = sum(r.nbytes for r in reports)
    timed = [r for r in reports if r.nbytes > 0]
    if not timed:
        return Measurement(streams, 0, 0.0, None, "no data arrived")
    span_ns = max(r.last_ns for r in timed) - min(r.first_ns for r in timed)
    if span_ns <= 0:
        return Measurement(streams, nbytes, 0.0, None, "too little data to time")
    seconds = span_ns / 1e9
    return Measurement(streams, nbytes, seconds, nbytes / seconds)


def pack_header(streams: int, test_id: bytes) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, streams, test_id)


def unpack_header(data: bytes) -> tuple[int, bytes]:
    """``(streams, test_id)``; ValueError for anything that is not a ddpkit sender."""
    if len(data) != _HEADER.size:
        raise ValueError(f"short header: {len(data)} bytes")
    magic, version, streams, test_id = _HEADER.unpack(data)
    if magic != MAGIC or version != VERSION or streams < 1:
        raise ValueError("not a ddpkit tcp-baseline sender")
    return streams, test_id


def pack_reply(report: StreamReport) -> bytes:
    return _REPLY.pack(report.nbytes, report.first_ns, report.last_ns)


def unpack_reply(data: bytes) -> StreamReport:
    if len(data) != _REPLY.size:
        raise ValueError(f"short reply: {len(data)} bytes")
    nbytes, first, last = _REPLY.unpack(data)
    return StreamReport(nbytes, first, last)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


class Receiver:
    """A listener on ``address`` (ephemeral port) that counts and times what senders write.

    ``start()`` runs it in daemon threads; ``close()`` stops accepting and joins them. Each
    connection is bounded by ``io_timeout`` of silence.
    """

    def __init__(self, address: str, *, port: int = 0, io_timeout: float = DEFAULT_IO_TIMEOUT) -> None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((address, port))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.address = address
        self.port: int = self._sock.getsockname()[1]
        self.io_timeout = io_timeout
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name="tcp-baseline-accept",
                                          daemon=True)

    def start(self) -> Receiver:
        self._acceptor.start()
        return self

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:  # the poll interval: look at the stop flag again
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                      name="tcp-baseline-conn")
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        with conn:
            conn.settimeout(self.io_timeout)
            try:
                unpack_header(_recv_exact(conn, _HEADER.size))
                nbytes, first, last = 0, 0, 0
                while True:
                    got = conn.recv_into(view)
                    if got == 0:
                        break
                    now = time.monotonic_ns()
                    if nbytes == 0:
                        first = now
                    last = now
                    nbytes += got
                conn.sendall(pack_reply(StreamReport(nbytes, first, last)))
            except (OSError, ValueError):
                return  # the sender reports the failure on its side

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._acceptor.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=self.io_timeout)

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _send_stream(conn: socket.socket, header: bytes, deadline: float, budget: int,
                 results: list[StreamReport | str], slot: int) -> None:
    payload = memoryview(os.urandom(CHUNK))  # incompressible, though nothing here compresses
    try:
        conn.sendall(header)
        sent = 0
        while sent < budget and time.monotonic() < deadline:
            piece = payload[: min(CHUNK, budget - sent)]
            conn.sendall(piece)
            sent += len(piece)
        conn.shutdown(socket.SHUT_WR)
        results[slot] = unpack_reply(_recv_exact(conn, _REPLY.size))
    except (OSError, ValueError) as exc:
        results[slot] = f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


def measure(
    address: str,
    port: int,
    *,
    streams: int = 1,
    seconds: float = 2.0,
    max_bytes: int = 1 << 30,
    source: str | None = None,
    connect_timeout: float = 10.0,
    io_timeout: float = DEFAULT_IO_TIMEOUT,
) -> Measurement:
    """Write to a :class:`Receiver` at ``address:port`` over ``streams`` connections.

    Bounded: at most ``seconds`` of writing and ``max_bytes`` in all (split evenly over the
    streams); every socket operation times out after ``io_timeout``. Never raises for network
    trouble: the :class:`Measurement` carries the error.
    """
    if streams < 1 or seconds <= 0 or max_bytes < streams:
        raise ValueError("need streams >= 1, seconds > 0 and max_bytes >= streams")
    test_id = os.urandom(8)
    header = pack_header(streams, test_id)
    conns: list[socket.socket] = []
    try:
        for _ in range(streams):
            conn = socket.create_connection(
                (address, port), timeout=connect_timeout,
                source_address=(source, 0) if source else None)
            conn.settimeout(io_timeout)
            conns.append(conn)
    except OSError as exc:
        for conn in conns:
            conn.close()
        return Measurement(streams, 0, 0.0, None, f"cannot connect to {address}:{port}: {exc}")
    results: list[StreamReport | str] = ["not finished"] * streams
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=_send_stream, daemon=True, name="tcp-baseline-send",
                                args=(conn, header, deadline, max_bytes // streams, results, i))
               for i, conn in enumerate(conns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 2 * io_timeout + 5)
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        return Measurement(streams, 0, 0.0, None, f"{address}:{port}: {errors[0]}")
    return aggregate(streams, [r for r in results if isinstance(r, StreamReport)])


def pair_rounds(nodes: int) -> list[list[tuple[int, int]]]:
    """Every ordered pair ``(sender, receiver)`` of ``nodes`` nodes once, in rounds of disjoint pairs.

    The circle method pairs the nodes into ``nodes - 1`` rounds (``nodes`` rounds when odd, one
    node resting); each round is run twice, once per direction. Within a round no node appears
    twice, so pairs in one round can run at the same time without sharing a NIC.
    """
    if nodes < 2:
        return []
    ring = list(range(nodes)) + ([None] if nodes % 2 else [])
    size = len(ring)
    rounds: list[list[tuple[int, int]]] = []
    for _ in range(size - 1):
        pairs = [(ring[i], ring[size - 1 - i]) for i in range(size // 2)]
        real = sorted((min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None)
        rounds.append([(a, b) for a, b in real])
        rounds.append([(b, a) for a, b in real])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds
