"""A failed connect as a failure of the run (rules/reading.py, Reading.connect_failed): c10d's
client socket warns of each address of a name it tries (torch v2.3.0 socket.cpp: "[W
socket.cpp:663] [c10d] The client socket has failed to connect to [{}]:{} (errno: {} - {})."; on
Windows "(system error: {} - {})" with FormatMessage's text). One warned attempt that failed
otherwise than refused, timed out or unroutable (EINVAL 22 "Invalid argument", WSAEADDRNOTAVAIL
10049 "The requested address is not valid in its context."), with nothing else failing, is no
failure: at most a warning; so are two, one in each address family (SocketConnectOp::run tries
IPv6, then IPv4, and a name's v4-mapped address in both; only a refused, reset or timed-out
connect is retried). Refused, timed out, unroutable, tried more often than its families explain,
or at error level, it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

WARNED = "[W socket.cpp:663] [c10d] The client socket has failed to connect to [{host}]:29500 ({why})."
LIGHTNING = ["GPU available: True (cuda), used: True",
             "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/1"]


@pytest.mark.parametrize("why", [
    "errno: 22 - Invalid argument",
    "system error: 10049 - The requested address is not valid in its context.",
])
def test_one_warned_attempt_at_another_address_is_no_failure(tmp_path: Path, why: str) -> None:
    found = top(tmp_path, [*LIGHTNING, WARNED.format(host="workstation01", why=why)])
    assert found.severity != "error"


@pytest.mark.parametrize("why", [
    "errno: 111 - Connection refused",
    "errno: 110 - Connection timed out",
    "errno: 113 - No route to host",
])
def test_the_peer_or_network_saying_no_is_a_failure(tmp_path: Path, why: str) -> None:
    found = top(tmp_path, [*LIGHTNING, WARNED.format(host="10.0.0.5", why=why)])
    assert found.severity == "error"


@pytest.mark.parametrize("why", [
    "errno: 22 - Invalid argument",
    "system error: 10049 - The requested address is not valid in its context.",
])
def test_one_attempt_in_each_address_family_is_no_failure(tmp_path: Path, why: str) -> None:
    line = WARNED.format(host="workstation01", why=why)
    found = top(tmp_path, [*LIGHTNING, line, line, "epoch 0 step 1"])
    assert found.severity != "error"


def test_the_same_attempt_tried_again_is_a_failure(tmp_path: Path) -> None:
    line = WARNED.format(host="workstation01", why="errno: 22 - Invalid argument")
    found = top(tmp_path, [*LIGHTNING, line, line, "epoch 0 step 1", line])
    assert found.severity == "error"
