"""Traps, ranking, recommendation and env lines, on recorded interface facts."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ddpkit.errors import ConfigError
from ddpkit.net.interfaces import Address, Nic, NicKind, interface_holding, nics_from_facts
from ddpkit.net.route import Route
from ddpkit.net.select import (
    env_lines,
    export_lines,
    find_interface,
    ranking,
    recommend,
    socket_env,
    traps,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "net"


def load(name: str) -> tuple[Nic, ...]:
    facts: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return nics_from_facts(facts)


def trap_ids(name: str) -> dict[str, list[str]]:
    nics = load(name)
    return {n.name: [t.id for t in traps(n, nics)] for n in nics}


def nic(name: str, kind: NicKind, *addrs: str, up: bool = True, speed: int | None = None) -> Nic:
    parsed = []
    for text in addrs:
        address, prefix = text.split("/")
        parsed.append(Address("ipv6" if ":" in address else "ipv4", address, int(prefix)))
    return Nic(name, kind, up, 1500, speed, tuple(parsed))


LO = nic("lo", NicKind.LOOPBACK, "127.0.0.1/8")

# ---- traps ------------------------------------------------------------------------------------


def test_cloud_traps() -> None:
    assert trap_ids("cloud_two_nic") == {"eth0": ["docker-default-subnet"], "eth1": [], "lo": ["loopback"]}


def test_docker_host_traps() -> None:
    assert trap_ids("docker_veth_noise") == {
        "br-5e1c0a7d9f21": ["interface-down", "container-bridge"],
        "docker0": ["docker-default-subnet", "container-bridge"],
        "eth0": [],
        "lo": ["loopback"],
        "veth3f2a1b9": ["link-local-only"],
        "virbr0": ["interface-down", "container-bridge"],
    }


def test_link_local_ipv6_only_and_no_address_traps() -> None:
    assert trap_ids("link_local_only")["eth0"] == ["link-local-only"]
    assert trap_ids("ipv6_only") == {"eth0": ["no-ipv4"], "lo": ["loopback"]}
    assert trap_ids("ib_eth")["ib1"] == ["interface-down", "no-address"]


def test_shared_address_only_with_an_interface_of_another_kind() -> None:
    eth1 = nic("eth1", NicKind.PHYSICAL, "10.0.0.2/24")
    br0 = nic("br0", NicKind.BRIDGE, "10.0.0.2/24")
    eth2 = nic("eth2", NicKind.PHYSICAL, "10.0.0.2/24")
    nics = [br0, eth1, eth2, LO]
    found = {n.name: [t for t in traps(n, nics) if t.id == "shared-address"] for n in nics}
    assert [t.message for t in found["eth1"]] == [
        "10.0.0.2 on eth1 is also on br0 (another kind of interface): which one traffic uses"
        " depends on routing"
    ]
    assert "eth1, eth2" in found["br0"][0].message
    # Link-local addresses repeat across links legitimately: never a shared-address trap.
    a = nic("a", NicKind.PHYSICAL, "10.1.0.1/24", "fe80::1/64")
    b = nic("b", NicKind.VETH, "10.2.0.1/24", "fe80::1/64")
    assert [t.id for t in traps(a, [a, b])] == []


def test_trap_messages_name_the_interface_and_the_cause() -> None:
    nics = load("cloud_two_nic")
    eth0 = find_interface("eth0", nics)
    (trap,) = traps(eth0, nics)
    assert "eth0" in trap.message and "172.17.0.4/16" in trap.message and "172.17.0.0/16" in trap.message
    assert not trap.blocking


# ---- ranking and recommendation ------------------------------------------------------------------


def test_cloud_recommends_eth1_over_the_docker_subnet_eth0() -> None:
    rec = recommend(load("cloud_two_nic"))
    assert (rec.nic.name, rec.address, rec.traps) == ("eth1", "10.0.0.34", ())
    assert "eth1" in rec.reason and "10.0.0.34/24" in rec.reason
    assert "eth0 (docker-default-subnet)" in rec.reason
    assert rec.env == {"NCCL_SOCKET_IFNAME": "=eth1", "GLOO_SOCKET_IFNAME": "eth1"}


def test_docker_noise_recommends_the_physical_nic() -> None:
    nics = load("docker_veth_noise")
    assert [n.name for n in ranking(nics)] == ["eth0", "docker0"]
    assert recommend(nics).nic.name == "eth0"


def test_ib_eth_ranks_by_speed_among_hardware_nics() -> None:
    nics = load("ib_eth")
    assert [n.name for n in ranking(nics)] == ["ib0", "ens2f0np0", "eth0"]
    rec = recommend(nics)
    assert (rec.nic.name, rec.address) == ("ib0", "192.168.100.5")


def test_overlay_host_prefers_the_vpc_nic_over_tunnels_and_pod_bridge() -> None:
    nics = load("overlay_tunnels")
    assert [n.name for n in ranking(nics)] == ["ens5", "flannel.1", "tailscale0", "wg0", "cni0"]


def test_link_local_only_has_no_usable_interface() -> None:
    with pytest.raises(ConfigError) as info:
        recommend(load("link_local_only"))
    err = info.value
    assert err.error_id == "no-usable-interface" and err.hint
    assert "eth0 (link-local-only)" in err.message and "docker0 (interface-down" in err.message


def test_ipv6_only_recommends_with_a_no_ipv4_warning() -> None:
    rec = recommend(load("ipv6_only"))
    assert (rec.nic.name, rec.address) == ("eth0", "fd00:10::5")
    assert [t.id for t in rec.traps] == ["no-ipv4"]


def test_recorded_vm_recommends_eth0() -> None:
    rec = recommend(load("vm_virtio_ifb"))
    assert (rec.nic.name, rec.address) == ("eth0", "192.0.2.2")


@pytest.mark.parametrize(
    ("nics", "winner"),
    [
        # kind order on otherwise equal interfaces: physical > veth > bridge > others
        ([nic("c", NicKind.BRIDGE, "10.0.3.1/24"), nic("b", NicKind.VETH, "10.0.2.1/24"),
          nic("a", NicKind.TUNNEL, "10.0.1.1/24"), nic("z", NicKind.PHYSICAL, "10.0.4.1/24")], "z"),
        ([nic("c", NicKind.BRIDGE, "10.0.3.1/24"), nic("b", NicKind.VETH, "10.0.2.1/24")], "b"),
        ([nic("c", NicKind.BRIDGE, "10.0.3.1/24"), nic("a", NicKind.VIRTUAL, "10.0.1.1/24")], "c"),
        # a private address beats a public one, whatever the kind
        ([nic("eth0", NicKind.PHYSICAL, "203.0.113.5/24"), nic("eth1", NicKind.VETH, "10.0.0.2/24")],
         "eth1"),
        # a trap costs more than kind: clean veth over docker-subnet physical
        ([nic("eth0", NicKind.PHYSICAL, "172.17.0.4/16"), nic("eth1", NicKind.VETH, "10.0.0.2/24")],
         "eth1"),
        # down and loopback never win, even alone with a good address
        ([nic("eth0", NicKind.PHYSICAL, "10.0.0.2/24", up=False),
          nic("eth1", NicKind.PHYSICAL, "203.0.113.9/24"), LO], "eth1"),
        # tie: faster first, then by name
        ([nic("eth1", NicKind.PHYSICAL, "10.0.0.2/24", speed=100000),
          nic("eth0", NicKind.PHYSICAL, "10.0.1.2/24", speed=25000)], "eth1"),
        ([nic("eth1", NicKind.PHYSICAL, "10.0.0.2/24"), nic("eth0", NicKind.PHYSICAL, "10.0.1.2/24")],
         "eth0"),
    ],
)  # fmt: skip
def test_ranking_rules(nics: list[Nic], winner: str) -> None:
    assert recommend(nics).nic.name == winner
    assert recommend(list(reversed(nics))).nic.name == winner  # input order never matters


def test_recommended_address_prefers_private_non_docker_ipv4() -> None:
    eth0 = nic("eth0", NicKind.PHYSICAL, "172.17.0.4/16", "203.0.113.5/24", "10.0.0.2/24", "fd00::2/64")
    assert recommend([eth0]).address == "10.0.0.2"


# ---- with a route ---------------------------------------------------------------------------


def test_route_wins_and_its_traps_are_reported() -> None:
    nics = load("cloud_two_nic")
    route = Route("8.8.8.8", "8.8.8.8", "ipv4", "eth0", "172.17.0.4", "172.17.0.1")
    rec = recommend(nics, route)
    assert (rec.nic.name, rec.address) == ("eth0", "172.17.0.4")
    assert [t.id for t in rec.traps] == ["docker-default-subnet"]
    assert "via gateway 172.17.0.1" in rec.reason and "the ranking would pick eth1" in rec.reason


def test_route_through_a_clean_interface() -> None:
    nics = load("cloud_two_nic")
    route = Route("master", "10.0.0.35", "ipv4", "eth1", "10.0.0.34")
    rec = recommend(nics, route)
    assert (rec.nic.name, rec.address, rec.traps) == ("eth1", "10.0.0.34", ())
    assert "master (10.0.0.35)" in rec.reason


def test_route_to_own_address() -> None:
    nics = load("cloud_two_nic")
    rec = recommend(nics, Route("10.0.0.34", "10.0.0.34", "ipv4", "eth1", "10.0.0.34", local=True))
    assert rec.nic.name == "eth1" and "own address" in rec.reason


def test_route_through_an_unknown_interface() -> None:
    with pytest.raises(ConfigError) as info:
        recommend(load("cloud_two_nic"), Route("x", "10.9.0.1", "ipv4", "wg9", "10.9.0.2"))
    assert info.value.error_id == "interface-not-found"


# ---- lookups and env ----------------------------------------------------------------------------


def test_find_interface_names_what_exists() -> None:
    nics = load("cloud_two_nic")
    assert find_interface("eth1", nics).name == "eth1"
    with pytest.raises(ConfigError) as info:
        find_interface("eth2", nics)
    assert info.value.error_id == "interface-not-found"
    assert "eth0, eth1, lo" in info.value.hint and info.value.details["available"] == ["eth0", "eth1", "lo"]


def test_interface_holding() -> None:
    nics = load("ib_eth")
    assert interface_holding("192.168.100.5", nics).name == "ib0"  # type: ignore[union-attr]
    assert interface_holding("fe80::b696:91ff:feaa:bb01%eth0", nics).name == "eth0"  # type: ignore[union-attr]
    assert interface_holding("10.9.9.9", nics) is None
    assert interface_holding("not an address", nics) is None


def test_socket_env_uses_ncclls_exact_match_form() -> None:
    env = socket_env("eth1")
    assert env == {"NCCL_SOCKET_IFNAME": "=eth1", "GLOO_SOCKET_IFNAME": "eth1"}
    assert env_lines(env) == ["NCCL_SOCKET_IFNAME==eth1", "GLOO_SOCKET_IFNAME=eth1"]
    assert export_lines(env) == ["export NCCL_SOCKET_IFNAME==eth1", "export GLOO_SOCKET_IFNAME=eth1"]


@pytest.mark.parametrize("bad", ["", "eth 1", "eth0,eth1", "^docker", "a" * 16, "x/y"])
def test_socket_env_refuses_non_names(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        socket_env(bad)
    assert info.value.error_id == "bad-interface-name"


def test_export_lines_are_valid_shell_for_awkward_values() -> None:
    env = {"NCCL_SOCKET_IFNAME": "=enp1s0f0.100", "WEIRD": "a b'c$d"}
    script = "\n".join(export_lines(env)) + '\nprintf "%s|%s" "$NCCL_SOCKET_IFNAME" "$WEIRD"'
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout == "=enp1s0f0.100|a b'c$d"
    assert export_lines({"X": "a b"}) == [f"export X={shlex.quote('a b')}"]


def test_interface_down_says_whether_admin_down_or_no_carrier() -> None:
    nics = load("docker_veth_noise") + load("ib_eth")
    down = {n.name: t.message for n in nics for t in traps(n, nics) if t.id == "interface-down"}
    assert "no carrier" in down["virbr0"] and "ip link set" not in down["virbr0"]
    assert "`ip link set ib1 up`" in down["ib1"]
