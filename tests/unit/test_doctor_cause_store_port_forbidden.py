"""causes/store_port_forbidden.py: the rendezvous store's bind refused as not permitted is
port-in-use, with a fix that names why. Lines made from torch's socket.cpp (v2.0: "The server
socket has failed to bind to {}{} (errno: {} - {})." and "The server socket has failed to listen on
any local network address."; on Windows the error code prints as "(system error: {} - {})"; v2.2 on,
libuv: "... port: {}, useIpv6: {}, code: {}, name: {}, message: {}") with bind(2)'s EACCES (13,
strerror "Permission denied", libuv's uv_strerror "permission denied") and Windows Sockets'
WSAEACCES (10013, FormatMessage "An attempt was made to access a socket in a way forbidden by its
access permissions.")."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

BIND = "[W socket.cpp:464] [c10d] The server socket has failed to bind to {where} ({error})."
LISTEN = "[E socket.cpp:500] [c10d] The server socket has failed to listen on any local network address."
RAISED = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
          "network address. The server socket has failed to bind to {where} ({error}).")
LIBUV = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
         "network address. port: {port}, useIpv6: 0, code: -13, name: EACCES, message: "
         "permission denied")
LINUX = "errno: 13 - Permission denied"
WINDOWS = ("system error: 10013 - An attempt was made to access a socket in a way forbidden by its "
           "access permissions.")
WINDOWS_ZH = "system error: 10013 - 以一种访问权限不允许的方式做了一个访问套接字的尝试。"


@pytest.mark.parametrize(("where", "error"), [
    ("0.0.0.0:80", LINUX), ("[::]:443", LINUX), ("0.0.0.0:29500", WINDOWS),
    ("[::]:50000", WINDOWS), ("0.0.0.0:29500", WINDOWS_ZH)])
def test_a_port_the_system_does_not_let_the_store_bind(tmp_path: Path, where: str,
                                                       error: str) -> None:
    found = top(tmp_path, [BIND.format(where=where, error=error), LISTEN,
                           RAISED.format(where=where, error=error)])
    assert (found.id, found.severity) == ("port-in-use", "error")
    assert where.rsplit(":", 1)[1] in found.explanation and "EACCES" in found.explanation
    assert "--master-port" in found.fix and "excludedportrange" in found.fix


@pytest.mark.parametrize("port", ["80", "29500"])
def test_libuv_s_words_for_it(tmp_path: Path, port: str) -> None:
    found = top(tmp_path, [LIBUV.format(port=port)])
    assert (found.id, found.severity) == ("port-in-use", "error")
    assert port in found.explanation


def test_a_warned_bind_that_the_next_address_takes_over_is_a_warning(tmp_path: Path) -> None:
    found = top(tmp_path, [BIND.format(where="[::]:29500", error=WINDOWS), "epoch 0 loss 2.3"])
    assert found.severity != "error"


def test_a_file_s_permission_denied_is_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           "PermissionError: [Errno 13] Permission denied: '/data/ckpt/last.pt'"])
    assert found.id != "port-in-use"
