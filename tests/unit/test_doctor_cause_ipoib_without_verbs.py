"""causes/ipoib_without_verbs.py: a node whose NCCL finds no usable InfiniBand yet binds an
IP-over-InfiniBand interface is ib-error, a warning; on a machine without InfiniBand the same
lines are normal.

Lines from NCCL's templates: misc/ibvwrap.cc "Failed to open libibverbs.so[.1]" (INFO from 2.18,
WARN before), transport/net_ib.cc "NET/IB : No device found.", transport/net_socket.cc "NET/Socket
: Using %s" with each interface as "[%d]%s:%s" (its name, its address), init.cc "Using network
%s", bootstrap.cc "Bootstrap : Using %s:%s"; each after the "host:pid:tid [dev] NCCL INFO "
prefix. Interface names: the ib_ipoib driver's ib<N>, systemd's ibp<bus>s<slot> and ibs<slot>."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

HEAD = "{host}:4012:4012 [0] NCCL {level} "


def lines(host: str, unavailable: str, level: str, iface: str) -> list[str]:
    head = HEAD.format(host=host, level="INFO")
    return [HEAD.format(host=host, level=level) + unavailable,
            head + f"NET/Socket : Using [0]{iface}:10.10.0.{len(host)}<0>",
            head + "Using network Socket",
            head + f"Bootstrap : Using {iface}:10.10.0.{len(host)}<0>"]


@pytest.mark.parametrize(("unavailable", "level"), [
    ("Failed to open libibverbs.so[.1]", "INFO"), ("Failed to open libibverbs.so[.1]", "WARN"),
    ("NET/IB : No device found.", "INFO")])
@pytest.mark.parametrize("iface", ["ib0", "ibp65s0", "ibs3"])
def test_nccl_on_ipoib_without_verbs_is_ib_error(tmp_path: Path, unavailable: str, level: str,
                                                  iface: str) -> None:
    found = top(tmp_path, lines("gpu-a01", unavailable, level, iface))
    assert (found.id, found.severity) == ("ib-error", "warning")
    assert iface in found.explanation and "/dev/infiniband" in found.fix


@pytest.mark.parametrize("iface", ["eth1", "enp65s0f0", "bond0", "ibverbs0x"])
def test_the_same_lines_on_ethernet_are_no_ib_finding(tmp_path: Path, iface: str) -> None:
    found = top(tmp_path, lines("node1", "Failed to open libibverbs.so[.1]", "INFO", iface))
    assert found.id != "ib-error"


def test_the_interface_of_another_node_does_not_count(tmp_path: Path) -> None:
    # node1 has no InfiniBand; node2 has it and its verbs work (no fallback line of its own)
    head2 = HEAD.format(host="node2", level="INFO")
    found = top(tmp_path, [*lines("node1", "Failed to open libibverbs.so[.1]", "INFO", "eth1"),
                           head2 + "NET/Socket : Using [0]ib0:10.10.0.9<0>"])
    assert found.id != "ib-error"
