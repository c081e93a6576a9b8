"""Windows Sockets' error codes read as the Linux errno of the same name (facts/kinds.py's
WINSOCK_ERRNOS): winsock2.h defines each WSAE* code as WSABASEERR (10000) plus the BSD errno of
its name. Lines made from torch's socket.cpp as Windows builds print an error code ("(system
error: %d - %s)", the text FormatMessage gives in the system's language; older builds the number
alone), Python's OSError on Windows ("[WinError %d] %s") and Gloo's libuv pair ("read: %s"); the
English texts are the FormatMessage texts of Microsoft's Windows Sockets Error Codes page, the
Chinese one Windows' zh-CN text for 10061."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.facts.extract import facts_of, of_kind
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.doctor.log.facts.winsock import winsock_errnos

REFUSED_EN = "No connection could be made because the target machine actively refused it."
REFUSED_ZH = "由于目标计算机积极拒绝，无法连接。"
TIMED_OUT = ("A connection attempt failed because the connected party did not properly respond "
             "after a period of time, or established connection failed because connected host "
             "has failed to respond.")
IN_USE = "Only one usage of each socket address (protocol/network address/port) is normally permitted."
CONNECT = ("[W socket.cpp:697] [c10d] The client socket has failed to connect to "
           "[192.168.1.10]:29500 (system error: {code} - {text}).")
TIMEOUT = ("torch.distributed.DistNetworkError: The client socket has timed out after 1800s while "
           "trying to connect to (192.168.1.10, 29500).")


@pytest.mark.parametrize(("text", "errnos"), [
    (f"(system error: 10048 - {IN_USE})", [98]),
    (f"ConnectionRefusedError: [WinError 10061] {REFUSED_EN}", [111]),
    ("(system error: 10049)", [99]),
    ("recv failed: WSAECONNRESET", [104]),
    ("(system error: 10099 - something else)", []),  # no errno of that name is read
    ("port 10061 is free", []),  # a number alone is not an error code
])
def test_the_codes_are_read_as_linux_errnos(text: str, errnos: list[int]) -> None:
    assert winsock_errnos(text) == errnos
    read = [int(f.value) for f in of_kind(facts_of(text), FactKind.ERRNO)]
    assert all(number in read for number in errnos)


def test_a_store_port_another_process_holds(tmp_path: Path) -> None:
    where = "0.0.0.0:29500"
    found = top(tmp_path, [
        f"[W socket.cpp:464] [c10d] The server socket has failed to bind to {where} (system "
        f"error: 10048 - {IN_USE}).",
        "[E socket.cpp:500] [c10d] The server socket has failed to listen on any local network "
        "address."])
    assert (found.id, found.severity) == ("port-in-use", "error")
    assert "29500" in found.explanation


@pytest.mark.parametrize(("code", "text", "words"), [
    (10061, REFUSED_EN, "were refused"), (10061, REFUSED_ZH, "were refused"),
    (10060, TIMED_OUT, "timed out"),
])
def test_connects_are_classed_by_their_code(tmp_path: Path, code: int, text: str,
                                            words: str) -> None:
    line = CONNECT.format(code=code, text=text)
    found = top(tmp_path, [line, line, line, TIMEOUT])
    assert found.severity == "error"
    assert words in found.explanation


@pytest.mark.parametrize("line", [
    "RuntimeError: [C:\\actions-runner\\_work\\pytorch\\pytorch\\pytorch\\third_party\\gloo\\gloo"
    "\\transport\\uv\\pair.cc:333] read: An existing connection was forcibly closed by the remote "
    "host.",
    "ConnectionResetError: [WinError 10054] An existing connection was forcibly closed by the "
    "remote host",
])
def test_a_reset_connection_is_a_lost_one(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "train.py", line 40, in <module>', "    dist.all_reduce(t)",
                           line])
    assert (found.id, found.severity) == ("connection-lost", "error")
