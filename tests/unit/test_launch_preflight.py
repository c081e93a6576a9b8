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


def test_no_route_to_the_master_ends_the_wait_long_before_its_timeout() -> None:
    """The kernel's "no route to host" (nobody answers ARP for a wrong address) does not change
    by waiting: the wait stops at the second such answer, not at --connect-timeout."""
    import errno

    now = [0.0]
    tried: list[float] = []

    def no_route(address: str, port: int, source: str | None, timeout: float) -> None:
        tried.append(now[0])
        now[0] += 3.0  # the kernel's ARP attempts
        raise OSError(errno.EHOSTUNREACH, "No route to host")

    with pytest.raises(NetworkProblem) as info:
        wait_for_master("10.0.0.99", 29500, source="10.0.0.3", ifname="eth1", timeout=60,
                        clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s),
                        connect=no_route)
    exc = info.value
    assert exc.error_id == "master-unreachable" and exc.details["no_route"] is True
    assert len(tried) == 2 and now[0] < 10
    assert "no route to host" in exc.message and "waiting longer cannot help" in exc.message
    assert "10.0.0.99" in exc.hint


def test_a_refusing_master_is_waited_for_until_the_timeout() -> None:
    """Refused is a master not started yet: that wait may succeed, so it runs its time."""
    import errno

    now = [0.0]

    def refused(address: str, port: int, source: str | None, timeout: float) -> None:
        now[0] += 0.01
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")

    with pytest.raises(NetworkProblem) as info:
        wait_for_master("10.0.0.2", 29500, source=None, ifname="eth1", timeout=20,
                        clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s),
                        connect=refused)
    assert info.value.details["no_route"] is False and now[0] >= 20
