"""``no-private-network``: which interface sets reach no other machine, on injected facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpkit.errors import ExitCode, NetworkProblem
from ddpkit.i18n import use_language
from ddpkit.net.interfaces import Address, Nic, NicKind, nics_from_facts
from ddpkit.net.isolation import check_reachable, isolation, no_private_network_error

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "net"


def nic(name: str, kind: NicKind, *addrs: str, up: bool = True) -> Nic:
    parsed = []
    for text in addrs:
        address, prefix = text.split("/")
        parsed.append(Address("ipv6" if ":" in address else "ipv4", address, int(prefix)))
    return Nic(name, kind, up, 1500, None, tuple(parsed))


LO = nic("lo", NicKind.LOOPBACK, "127.0.0.1/8", "::1/128")
NAT_ETH0 = nic("eth0", NicKind.VETH, "172.17.0.4/16", "fe80::1/64")  # the shared container NAT


def load(name: str) -> tuple[Nic, ...]:
    facts: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return nics_from_facts(facts)


def test_only_the_shared_nat_eth0_is_isolated_and_names_what_was_tried() -> None:
    found = isolation([LO, NAT_ETH0])
    assert found is not None
    assert [(t.ifname, t.address) for t in found.tried] == [("eth0", "172.17.0.4")]
    error = no_private_network_error(found, tun_device=False)
    assert isinstance(error, NetworkProblem) and error.exit_code == ExitCode.NETWORK
    assert error.error_id == "no-private-network"
    assert "tried eth0 172.17.0.4, a NAT address in Docker's default subnet" in error.message
    for words in ("no network between them", "more GPUs in one instance", "WireGuard",
                  "Tailscale", "TUN device"):
        assert words in error.message
    assert error.details["interfaces"] == ["eth0"]


@pytest.mark.parametrize("other", [
    nic("eth1", NicKind.VETH, "10.0.0.34/24"),  # the guide's private NIC
    nic("tailscale0", NicKind.TUNNEL, "100.101.102.103/32"),  # an overlay network
    nic("wg0", NicKind.TUNNEL, "172.17.5.1/24"),  # a tunnel is never a container's NAT side
    nic("ens5", NicKind.PHYSICAL, "172.17.3.9/16"),  # a VPC that uses 172.17.0.0/16 for real
    nic("eth1", NicKind.VETH, "2001:db8::5/64"),  # a global IPv6 address
])
def test_any_interface_that_may_reach_a_peer_clears_it(other: Nic) -> None:
    assert isolation([LO, NAT_ETH0, other]) is None
    check_reachable([LO, NAT_ETH0, other], tun_device=False)  # does not raise


def test_unused_tunnels_and_bridges_do_not_count() -> None:
    nics = [LO, NAT_ETH0, nic("tunl0", NicKind.TUNNEL, up=False), nic("sit0", NicKind.TUNNEL),
            nic("docker0", NicKind.CONTAINER_BRIDGE, "172.18.0.1/16")]
    found = isolation(nics)
    assert found is not None
    assert [t.ifname for t in found.tried] == ["eth0", "tunl0", "sit0", "docker0"]
    assert "tunl0, down; sit0, no IP address; docker0 172.18.0.1, a container" in (
        no_private_network_error(found, tun_device=True).message)
    with pytest.raises(NetworkProblem, match="no network between them"):
        check_reachable(nics, tun_device=True)


@pytest.mark.parametrize("broken", [
    nic("eth1", NicKind.VETH, "10.0.0.3/24", up=False),  # the private NIC, down
    nic("ens5", NicKind.PHYSICAL),  # a NIC without its address yet
])
def test_a_private_nic_to_repair_is_left_to_the_usual_checks(broken: Nic) -> None:
    assert isolation([LO, NAT_ETH0, broken]) is None


def test_loopback_alone_is_isolated() -> None:
    found = isolation([LO])
    assert found is not None and found.tried == ()
    assert "tried no interface but loopback" in no_private_network_error(found, tun_device=False).message


def test_recorded_machines() -> None:
    assert isolation(load("cloud_two_nic")) is None  # eth0 NAT plus eth1 private
    assert isolation(load("docker_veth_noise")) is None  # a docker host: its eth0 reaches peers


def test_the_sentence_in_chinese() -> None:
    error = no_private_network_error(isolation([LO, NAT_ETH0]), tun_device=False)  # type: ignore[arg-type]
    try:
        use_language("zh")
        shown = error.message.localized()  # type: ignore[attr-defined]
    finally:
        use_language("en")
    assert "实例之间没有内网" in shown and "eth0 172.17.0.4，Docker 默认网段" in shown
    assert "WireGuard" in shown and "/dev/net/tun" in shown


@pytest.mark.parametrize("tun_device", [True, False])
def test_it_says_whether_this_node_has_the_tun_device_an_overlay_needs(
        tun_device: bool) -> None:
    found = isolation([LO, NAT_ETH0])
    assert found is not None
    error = no_private_network_error(found, tun_device=tun_device)
    assert error.details["tun_device"] is tun_device
    said = ("/dev/net/tun exists on this node" if tun_device else
            "/dev/net/tun does not exist on this node")
    assert said in error.message
    for overlay in ("WireGuard", "Tailscale", "ZeroTier"):
        assert overlay in error.message
    assert ("can run here" in error.message) is tun_device
    assert "The safe choice is more GPUs in one instance" in error.message

    use_language("zh")
    try:
        zh = error.message.localized()
    finally:
        use_language("en")
    assert ("本节点有 /dev/net/tun" if tun_device else "本节点没有 /dev/net/tun") in zh
    assert "ZeroTier" in zh and "在一个实例里租用多卡" in zh


def test_the_tun_device_is_looked_for_where_asked(tmp_path: Path) -> None:
    from ddpkit.net.facts import tun_device_exists

    assert not tun_device_exists(str(tmp_path / "tun"))
    (tmp_path / "tun").touch()
    assert tun_device_exists(str(tmp_path / "tun"))
