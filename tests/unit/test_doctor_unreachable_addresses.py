"""Addresses a peer cannot reach, read from what they are (RFC 3927's 169.254.0.0/16, RFC
4291's fe80::/10: rules/network.py's reading of a failed connect, doctor/addresses.py) and from
what the connect's errno means (EHOSTUNREACH 113, ENETUNREACH 101, causes/no_route.py: no route,
no process was asked). Sources of the lines:

- NCCL v2.21.5 src/transport/net_socket.cc: "NET/Socket : Using" and the interface list
  "[%d]%s:%s<0>"; src/misc/socket.cc, socketPollConnect: "%s: connect to %s returned %s,
  retrying (%d/%d) after sleep for %u msec"; v2.18 socketStartConnect: "Connect to %s failed :
  %s" after ProcessGroupNCCL's "unhandled system error" and "Last error:" (v2.11 socketConnect:
  "Connect to %s failed : %s"), the address as ncclSocketToString prints it, "<ip><<port>>"
- torch v2.4 torch/csrc/distributed/c10d/socket.cpp: "The client socket has failed to connect to
  any network address of (%s, %d). The client socket has failed to connect to %s:%d (errno: %d -
  %s)."
- Linux errno(3): 101 ENETUNREACH "Network is unreachable", 113 EHOSTUNREACH "No route to host",
  111 ECONNREFUSED "Connection refused"
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

PREFIX = "node1:4242:4300 [0] "
USING = PREFIX + "NCCL INFO NET/Socket : Using [0]eth1:10.0.0.3<0> [1]{name}:{address}<0>"
RETRY = (PREFIX + "NCCL INFO socketPollConnect: connect to {address}<43125> returned Connection "
         "refused, retrying (13/34) after sleep for 1300 msec")
C10D = ("torch.distributed.DistNetworkError: The client socket has failed to connect to any "
        "network address of ({host}, 29500). The client socket has failed to connect to "
        "{address}:29500 (errno: {errno} - {text}).")


@pytest.mark.parametrize(("name", "address"), [("pod-id-link0", "169.254.170.23"),
                                               ("eth9", "169.254.1.7")])
def test_a_failed_dial_to_a_link_local_address_is_the_wrong_interface(tmp_path: Path, name: str,
                                                                      address: str) -> None:
    found = top(tmp_path, [USING.format(name=name, address=address),
                           RETRY.format(address=address),
                           "RuntimeError: NCCL error: remote process exited or there was a "
                           "network error"])
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert address in found.explanation


def test_a_dial_line_without_its_port_is_read_by_its_address(tmp_path: Path) -> None:
    # a thread's copy that elided the port ("<...>"), and no interface list
    found = top(tmp_path, [RETRY.format(address="169.254.170.23").replace("<43125>", "<...>")])
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "169.254.170.23, a link-local address" in found.explanation
    assert "NCCL_SOCKET_IFNAME" in found.fix


def test_a_link_local_interface_with_nothing_failing_is_no_error(tmp_path: Path) -> None:
    found = top(tmp_path, [USING.format(name="pod-id-link0", address="169.254.170.23"),
                           PREFIX + "NCCL INFO comm 0x55 rank 0 nranks 1 - Init COMPLETE"])
    assert found.severity != "error"


@pytest.mark.parametrize(("errno", "text"), [(113, "No route to host"),
                                             (101, "Network is unreachable")])
@pytest.mark.parametrize(("host", "address"), [("192.168.121.122", "192.168.121.122"),
                                               ("bun003", "bun003.admin")])
def test_no_route_to_the_master_is_an_address_on_a_network_this_node_lacks(
        tmp_path: Path, errno: int, text: str, host: str, address: str) -> None:
    found = top(tmp_path, [C10D.format(host=host, address=address, errno=errno, text=text)])
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert f"errno {errno}" in found.explanation and "ip route get" in found.fix


def test_a_refused_connection_is_not_a_missing_route(tmp_path: Path) -> None:
    found = top(tmp_path, [C10D.format(host="10.0.0.2", address="10.0.0.2", errno=111,
                                       text="Connection refused")])
    assert found.id != "wrong-interface"


@pytest.mark.parametrize("where", ["socketStartConnect: ", ""])
@pytest.mark.parametrize(("errno", "text"), [(113, "No route to host"),
                                             (101, "Network is unreachable")])
def test_nccl_with_no_route_to_a_peer_s_address(tmp_path: Path, where: str, errno: int,
                                                text: str) -> None:
    found = top(tmp_path, [
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1333, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.18.6",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
        "device error. ", "Last error:",
        f"{where}Connect to 10.20.0.14<52822> failed : {text}"])
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "10.20.0.14" in found.explanation and "NCCL_SOCKET_IFNAME" in found.fix
