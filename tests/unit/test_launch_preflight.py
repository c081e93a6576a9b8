from __future__ import annotations

import socket
import time

import pytest

from ddpkit.errors import NetworkProblem
from ddpkit.launch.node.preflight import check_port_free, wait_for_master


def test_free_port_passes(tcp_port: int) -> None:
    check_port_free(tcp_port)


def test_busy_port_is_named_with_its_owner() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(NetworkProblem) as info:
            check_port_free(port)
    assert info.value.error_id == "port-in-use"
    assert str(port) in info.value.message
    assert "--master-port" in info.value.hint


@pytest.mark.timeout(30)
def test_wait_for_master_returns_once_it_listens() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        waited = wait_for_master("127.0.0.1", port, source="127.0.0.1", ifname="lo", timeout=5)
    assert waited < 5


@pytest.mark.timeout(30)
def test_unreachable_master_fails_within_the_timeout_naming_what_was_tried(tcp_port: int) -> None:
    port = tcp_port
    retries: list[str] = []
    with pytest.raises(NetworkProblem) as info:
        wait_for_master("127.0.0.1", port, source="127.0.0.1", ifname="lo", timeout=1.5,
                        on_retry=lambda err, _t: retries.append(err))
    exc = info.value
    assert exc.error_id == "master-unreachable"
    assert f"127.0.0.1:{port}" in exc.message and "lo" in exc.message
    assert "refused" in exc.details["last_error"]
    assert exc.details["attempts"] >= 2 and retries


def test_a_busy_port_suggests_the_flag_that_moves_it() -> None:
    import socket

    from ddpkit.launch.node.preflight import check_port_free

    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(NetworkProblem) as info:
            check_port_free(port, flag="--join-port", what="job-store port (token mode)",
                            fix="(the token tells the other nodes)")
    assert info.value.error_id == "port-in-use"
    assert info.value.message.startswith(f"job-store port (token mode) {port} is already in use")
    assert info.value.hint.endswith(f"e.g. --join-port {port + 1}")
    assert "\n" not in info.value.message


def test_a_cancelled_wait_returns_without_raising() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 3

    start = time.monotonic()
    wait_for_master("127.0.0.1", port, source=None, ifname="lo", timeout=30, cancelled=cancelled)
    assert time.monotonic() - start < 5 and len(calls) == 4
