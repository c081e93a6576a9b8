"""The fact extractor: values of every class, in the documented formats of their programs."""

from __future__ import annotations

import pytest

from ddpkit.doctor.log.facts.extract import address_class, endpoint_port, facts_of, of_kind
from ddpkit.doctor.log.facts.kinds import ERRNOS, AddressClass, FactKind


@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", AddressClass.LOOPBACK), ("127.0.1.1", AddressClass.LOOPBACK),
    ("::1", AddressClass.LOOPBACK), ("[::1]", AddressClass.LOOPBACK),
    ("localhost", AddressClass.LOOPBACK), ("::ffff:127.0.0.1", AddressClass.LOOPBACK),
    ("169.254.10.2", AddressClass.LINK_LOCAL), ("fe80::1%eth0", AddressClass.LINK_LOCAL),
    ("172.17.0.4", AddressClass.CONTAINER_BRIDGE), ("172.18.0.4", AddressClass.PRIVATE),
    ("10.0.0.2", AddressClass.PRIVATE), ("192.168.1.3", AddressClass.PRIVATE),
    ("100.64.1.1", AddressClass.PRIVATE), ("8.8.4.4", AddressClass.PUBLIC),
    ("0.0.0.0", AddressClass.UNSPECIFIED), ("::", AddressClass.UNSPECIFIED),
])
def test_address_classes(address: str, kind: AddressClass) -> None:
    assert address_class(address) is kind


def test_no_address_in_versions_or_times() -> None:
    facts = facts_of("I1204 09:50:12.118000 NCCL version 2.18.3+cuda12.1 torch 2.1.0.dev")
    assert not of_kind(facts, FactKind.ADDRESS)
    assert [f.value for f in of_kind(facts, FactKind.VERSION)] == ["2.18.3", "12.1"]


@pytest.mark.parametrize("number", sorted(ERRNOS))
def test_errno_from_number_name_or_text(number: int) -> None:
    name, text = ERRNOS[number]
    for line in (f"(errno: {number} - {text})", f"[Errno {number}] {text}",
                 f"code: -{number}, name: {name}, message: x", f"failed: {text}"):
        errnos = of_kind(facts_of(line), FactKind.ERRNO)
        assert [(f.value, f.detail) for f in errnos] == [(str(number), name)], line


def test_nccl_interface_and_address_pairs() -> None:
    facts = facts_of("h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>")
    assert of_kind(facts, FactKind.INTERFACE)[0].value == "lo"
    assert of_kind(facts, FactKind.ADDRESS)[0].address_class is AddressClass.LOOPBACK


def test_settings_counts_and_shapes() -> None:
    facts = facts_of("NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens9f0")
    assert of_kind(facts, FactKind.IFNAME_SETTING)[0].value == "ens9f0"
    assert of_kind(facts_of("GLOO_SOCKET_IFNAME=eth1"), FactKind.IFNAME_SETTING)[0].detail == (
        "GLOO_SOCKET_IFNAME")
    barrier = facts_of("(world_size=4, worker_count=7, timeout=0:30:00)")
    assert of_kind(barrier, FactKind.WORLD_SIZE)[0].value == "4"
    assert of_kind(barrier, FactKind.WORKER_COUNT)[0].value == "7"
    for line in ("torchrun --nnodes=3 x.py", "nnodes=1:3", "comm 0x1 nNodes 3 localRanks 8",
                 "  max_nodes        : 3", "  group_world_size=3"):
        assert of_kind(facts_of(line), FactKind.NNODES)[0].value == "3", line
    assert of_kind(facts_of("address  with family 0 is neither AF_INET(2)"),
                   FactKind.EMPTY_ADDRESS)[0].value == "0"
    assert of_kind(facts_of("exitcode  : -9 (pid: 1)"), FactKind.EXIT_CODE)[0].value == "-9"
    assert of_kind(facts_of("Signal 9 (SIGKILL) received"), FactKind.SIGNAL)[0].value == "SIGKILL"


@pytest.mark.parametrize(("endpoint", "port"), [
    ("10.0.0.2:29400", "29400"), ("10.0.0.2", None), ("node-1", None), ("[fd00::2]:1", "1"),
    ("fd00::2", None), ("node-1:29500", "29500"),
])
def test_endpoint_port(endpoint: str, port: str | None) -> None:
    assert endpoint_port(endpoint) == port
