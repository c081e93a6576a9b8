"""Cluster doctor's echo listener and probes, for real on loopback (no torch, no other address)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from ddpkit.doctor.cluster.matrix import ProbeTarget
from ddpkit.doctor.cluster.model import Candidate
from ddpkit.doctor.cluster.sockets import EchoListener, probe, probe_all

LO = Candidate("lo", "127.0.0.1", "loopback", 0)
NONCES = {"me": 0, "peer": 1, "third": 2}


def target(port: int, nonce: str = "peer", source: Candidate = LO) -> ProbeTarget:
    return ProbeTarget(source, 1, Candidate("lo", "127.0.0.1", "loopback", 0), port, nonce)


@pytest.fixture
def listener() -> Iterator[tuple[EchoListener, int]]:
    with EchoListener(1, "peer", host="127.0.0.1") as echo:
        ((family, port),) = echo.start()
        assert family == "ipv4"
        yield echo, port


class SilentServer:
    """Accepts and then says ``greeting`` (or nothing) and holds the connection open."""

    def __init__(self, greeting: bytes = b"") -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = int(self.sock.getsockname()[1])
        self.greeting = greeting
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        held = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.sendall(self.greeting)
            held.append(conn)
        for conn in held:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def test_right_listener_is_ok_and_says_what_it_saw(listener: tuple[EchoListener, int]) -> None:
    echo, port = listener
    result = probe(0, target(port), NONCES)
    assert result.status == "ok" and result.seen == "127.0.0.1"
    assert echo.answered == 1


def test_source_address_is_the_one_bound(listener: tuple[EchoListener, int]) -> None:
    _, port = listener
    other = Candidate("lo", "127.0.0.2", "loopback", 0)  # all of 127/8 is local on Linux
    result = probe(0, target(port, source=other), NONCES)
    assert result.status == "ok" and result.seen == "127.0.0.2"


def test_listener_of_another_node_or_of_itself_does_not_count(
        listener: tuple[EchoListener, int]) -> None:
    _, port = listener
    assert probe(2, target(port, nonce="third"), NONCES).status == "other-node"
    assert probe(1, target(port, nonce="me"), {"peer": 1}).status == "self"


def test_closed_port_is_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])  # bound, never listening: connections are refused
        assert probe(0, target(port), NONCES).status == "refused"


def test_unbindable_source_is_no_source(listener: tuple[EchoListener, int]) -> None:
    _, port = listener
    foreign = Candidate("eth9", "192.0.2.1", "physical", 0)  # TEST-NET-1: never ours, never sent
    assert probe(0, target(port, source=foreign), NONCES).status == "no-source"


def test_a_stranger_service_is_a_bad_answer_and_silence_a_timeout() -> None:
    ssh = SilentServer(b"SSH-2.0-OpenSSH_9.2\r\n")
    silent = SilentServer()
    try:
        assert probe(0, target(ssh.port), NONCES).status == "bad-answer"
        started = time.monotonic()
        result = probe(0, target(silent.port), NONCES, answer_timeout=0.3)
        assert result.status == "timeout" and time.monotonic() - started < 2
    finally:
        ssh.close()
        silent.close()


def test_probe_all_runs_in_parallel_under_one_deadline(listener: tuple[EchoListener, int]) -> None:
    _, port = listener
    silent = SilentServer()
    try:
        targets = [target(port)] + [target(silent.port)] * 6
        started = time.monotonic()
        results = probe_all(0, targets, NONCES, phase_s=0.5, answer_timeout=5.0)
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert elapsed < 2.0  # six 5 s answer timeouts, yet one 0.5 s phase
    assert results[0].status == "ok"
    assert all(r.status == "timeout" and "probe phase ended" in r.detail for r in results[1:])


def test_dual_stack_listener_reports_ipv4_peers_plainly() -> None:
    with EchoListener(1, "peer") as echo:
        ports = dict(echo.start())
        result = probe(0, target(ports["ipv4"]), NONCES)
    assert result.status == "ok" and result.seen == "127.0.0.1"


def test_listener_stops_when_closed(listener: tuple[EchoListener, int]) -> None:
    echo, port = listener
    echo.close()
    assert probe(0, target(port), NONCES).status == "refused"
