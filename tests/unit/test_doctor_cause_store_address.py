"""causes/store_address.py: the rendezvous store told to listen on an address this machine does
not have is rendezvous-config. Lines made from torch's socket.cpp (v2.0: "The server socket has
failed to bind to {}{} (errno: {} - {}).", "The server socket has failed to listen on any local
network address."; v2.2 on, libuv: DistNetworkError "The server socket has failed to listen on any
local network address. port: {}, useIpv6: {}, code: {}, name: {}, message: {}") with bind(2)'s
EADDRNOTAVAIL (99, strerror "Cannot assign requested address"; libuv's uv_strerror "address not
available"), and addresses of the fact classes."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

BIND = ("[W socket.cpp:436] [c10d] The server socket has failed to bind to {where} (errno: {errno} "
        "- {text}).")
LISTEN = "[E socket.cpp:470] [c10d] The server socket has failed to listen on any local network address."
TRACE = ["Traceback (most recent call last):", '  File "/opt/conda/bin/torchrun", line 8, in <module>',
         "    sys.exit(main())"]
LIBUV = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
         "network address. port: {port}, useIpv6: 0, code: -99, name: EADDRNOTAVAIL, message: "
         "address not available")


@pytest.mark.parametrize("where", ["10.0.0.9:29500", "192.168.1.20:23456", "8.8.4.4:29500",
                                   "[fd00::5]:29500", "172.17.0.1:29500"])
def test_a_master_address_not_on_this_machine(tmp_path: Path, where: str) -> None:
    found = top(tmp_path, [BIND.format(where=where, errno=99, text="Cannot assign requested "
                                                                   "address"), LISTEN, *TRACE,
                           "RuntimeError: The server socket has failed to listen on any local "
                           "network address."])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert where.rsplit(":", 1)[0].strip("[]") in found.explanation
    assert "--master-addr" in found.fix and "ip -brief addr" in found.fix


@pytest.mark.parametrize("port", ["29500", "6000"])
def test_libuv_s_words_for_it(tmp_path: Path, port: str) -> None:
    found = top(tmp_path, [*TRACE, LIBUV.format(port=port)])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "EADDRNOTAVAIL" in found.explanation


def test_any_address_refused_where_ipv6_is_off_is_not_this_cause(tmp_path: Path) -> None:
    # c10d tries [::] first; with IPv6 turned off that bind fails and the next address works
    found = top(tmp_path, [BIND.format(where="[::]:29500", errno=99,
                                       text="Cannot assign requested address"),
                           "[I socket.cpp] [c10d] The server socket has started to listen on "
                           "0.0.0.0:29500.", "epoch 0 step 1 loss 2.3"])
    assert found.id != "rendezvous-config"


def test_a_port_in_use_is_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, [BIND.format(where="10.0.0.9:29500", errno=98,
                                       text="Address already in use"), LISTEN])
    assert found.id == "port-in-use"


def test_a_client_out_of_local_ports_is_not_this_cause(tmp_path: Path) -> None:
    # connect(2)'s EADDRNOTAVAIL: no free local port, not the store's address
    found = top(tmp_path, ["[W socket.cpp:663] [c10d] The client socket has failed to connect to "
                           "[10.0.0.5]:29500 (errno: 99 - Cannot assign requested address)."])
    assert found.id != "rendezvous-config" or "listen" not in found.explanation
