"""c10d's per-attempt connect lines against its summary (facts/network.C10D_NAMED_TARGET): the
summary names the target the job gave, an attempt's line one resolved address, which torch 2.13
printed garbled for IPv4 (a dial of 10.0.0.2:29411 as "[::]:2354" and "73.86.0.0:3675",
tests/fixtures/logs/torchrun-sim/noroute). Lines: torch v2.13.0, torch/csrc/distributed/c10d/
socket.cpp (SocketConnectOp: "The client socket has failed to connect to {} (errno: {} - {}).",
then "The client socket has failed to connect to any network address of ({}, {})."), TCPStore.cpp
("TCP client failed to connect/validate to host {}:{} - retrying (try={}, timeout={}ms,
delay={}ms): {}", the what() the summary and the last attempt's line joined)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

W = "[W1207 09:28:43.983826990 socket.cpp:764] [c10d] "
E = "[E1207 09:28:43.983849704 socket.cpp:818] [c10d] "
T = "[W1207 09:28:43.988154471 TCPStore.cpp:340] [c10d] "


def attempts(error: str, tries: int) -> list[str]:
    lines = []
    for attempt in range(tries):
        lines += [W + f"The client socket has failed to connect to [::]:2354 (errno: {error}).",
                  W + f"The client socket has failed to connect to [5ad0:0:590:0:7fcd::]:3673 "
                      f"(errno: {error}).",
                  E + "The client socket has failed to connect to any network address of "
                      "(10.0.0.2, 29411).",
                  T + f"TCP client failed to connect/validate to host 10.0.0.2:29411 - retrying "
                      f"(try={attempt}, timeout=20000ms, delay=377ms): {failure(error)}"]
    return [*lines, "torch.distributed.DistNetworkError: " + failure(error)]


def failure(error: str) -> str:
    # (the exception's what(): the summary, then the last attempt's line, as c10d joins them)
    return ("The client socket has failed to connect to any network address of (10.0.0.2, "
            f"29411). The client socket has failed to connect to 73.86.0.0:3675 (errno: {error}).")


@pytest.mark.parametrize(("error", "finding"), [("111 - Connection refused", "peer-unreachable"),
                                                ("113 - No route to host", "wrong-interface")])
def test_the_target_is_the_summarys_not_a_garbled_attempts(tmp_path: Path, error: str,
                                                           finding: str) -> None:
    found = top(tmp_path, attempts(error, 3))
    assert (found.id, found.severity) == (finding, "error")
    assert "10.0.0.2" in found.explanation
    assert not any(garbled in found.explanation for garbled in ("2354", "3673", "5ad0"))


def test_an_attempt_on_the_summarys_port_is_still_read(tmp_path: Path) -> None:
    # (an attempt's address whose port is the target's is no garbling: a v4-mapped one, say)
    lines = [W + "The client socket has failed to connect to [::ffff:10.0.0.2]:29411 (errno: "
                 "111 - Connection refused).",
             E + "The client socket has failed to connect to any network address of "
                 "(10.0.0.2, 29411)."]
    found = top(tmp_path, [*lines, *lines, "torch.distributed.DistNetworkError: The client socket "
                           "has failed to connect to any network address of (10.0.0.2, 29411)."])
    assert "::ffff:10.0.0.2" in found.explanation


@pytest.mark.parametrize(("local", "remote"), [("[::ffff:10.0.0.3]:45194", "::ffff:10.0.0.2:29411"),
                                               ("[10.0.0.3]:45194", "10.0.0.2:29411")])
def test_a_reset_quotes_the_sockets_remote_end_not_its_own(tmp_path: Path, local: str,
                                                           remote: str) -> None:
    # TCPStore.cpp: "recvValue failed on {}: {}" with socket.cpp's formatter of a socket,
    # "SocketImpl(fd={}, addr={}, remote={})": its own address first
    host, port = remote.rsplit(":", 1)
    found = top(tmp_path, [
        f"[E1207 09:03:52.419395147 TCPStore.cpp:138] [c10d] recvValue failed on SocketImpl(fd=3, "
        f"addr={local}, remote=[{host}]:{port}): Connection reset by peer",
        "torch.distributed.DistNetworkError: Connection reset by peer"])
    assert found.id == "connection-lost"
    assert remote in found.explanation and "45194" not in found.explanation
