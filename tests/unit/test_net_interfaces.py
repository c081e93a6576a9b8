"""Interface facts and kinds: recorded fixtures, a fake /sys tree, and this machine."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ddpkit.net.facts import collect_facts as collect_facts_from
from ddpkit.net.interfaces import (
    Address,
    NicKind,
    classify,
    collect_facts,
    discover,
    nics_from_facts,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "net"


def load(name: str) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return facts


def kinds(name: str) -> dict[str, str]:
    return {nic.name: nic.kind.value for nic in nics_from_facts(load(name))}


# ---- Address --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "address", "loopback", "link_local", "private", "routable"),
    [
        ("ipv4", "127.0.0.1", True, False, False, False),
        ("ipv4", "169.254.7.9", False, True, False, False),
        ("ipv4", "10.0.0.34", False, False, True, True),
        ("ipv4", "172.17.0.4", False, False, True, True),
        ("ipv4", "192.168.1.20", False, False, True, True),
        ("ipv4", "100.101.102.103", False, False, True, True),  # CGNAT: cloud private ranges
        ("ipv4", "192.0.2.2", False, False, False, True),  # TEST-NET: not a private network
        ("ipv4", "8.8.8.8", False, False, False, True),
        ("ipv6", "::1", True, False, False, False),
        ("ipv6", "fe80::1", False, True, False, False),
        ("ipv6", "fd00:10::5", False, False, True, True),
        ("ipv6", "2001:db8:1::5", False, False, False, True),
    ],
)
def test_address_properties(
    family: str, address: str, loopback: bool, link_local: bool, private: bool, routable: bool
) -> None:
    addr = Address(family, address, 24)  # type: ignore[arg-type]
    assert (addr.is_loopback, addr.is_link_local, addr.is_private, addr.is_routable) == (
        loopback,
        link_local,
        private,
        routable,
    )


def test_address_with_prefix_and_docker_subnet() -> None:
    assert Address("ipv4", "10.0.0.2", 24).with_prefix == "10.0.0.2/24"
    assert Address("ipv6", "fd00::2", 64).with_prefix == "fd00::2/64"
    assert Address("ipv4", "172.17.255.254", 16).in_docker_default_subnet
    assert not Address("ipv4", "172.18.0.1", 16).in_docker_default_subnet
    assert not Address("ipv6", "::ffff:172.17.0.4", 128).in_docker_default_subnet


# ---- classification from recorded facts -----------------------------------------------------


def test_cloud_two_nic_kinds_and_addresses() -> None:
    nics = {n.name: n for n in nics_from_facts(load("cloud_two_nic"))}
    assert sorted(nics) == ["eth0", "eth1", "lo"]
    assert nics["eth0"].kind is NicKind.VETH and nics["eth1"].kind is NicKind.VETH
    assert nics["lo"].kind is NicKind.LOOPBACK
    assert [a.with_prefix for a in nics["eth0"].ipv4] == ["172.17.0.4/16"]
    assert [a.with_prefix for a in nics["eth1"].ipv4] == ["10.0.0.34/24"]
    assert all(a.is_link_local for a in nics["eth1"].ipv6)
    assert nics["eth1"].up and nics["eth1"].mtu == 1500 and nics["eth1"].speed_mbps == 10000
    assert nics["lo"].up  # operstate "unknown" with IFF_UP is up


def test_docker_host_kinds() -> None:
    assert kinds("docker_veth_noise") == {
        "br-5e1c0a7d9f21": "container-bridge",
        "docker0": "container-bridge",
        "eth0": "physical",
        "lo": "loopback",
        "veth3f2a1b9": "veth",
        "virbr0": "container-bridge",
    }
    nics = {n.name: n for n in nics_from_facts(load("docker_veth_noise"))}
    assert nics["veth3f2a1b9"].master == "docker0"
    assert not nics["br-5e1c0a7d9f21"].up  # IFF_UP but operstate down (no containers)
    assert nics["eth0"].driver == "igb" and nics["eth0"].speed_mbps == 1000


def test_infiniband_and_roce() -> None:
    assert kinds("ib_eth") == {
        "ens2f0np0": "physical",
        "eth0": "physical",
        "ib0": "infiniband",
        "ib1": "infiniband",
        "lo": "loopback",
    }
    nics = {n.name: n for n in nics_from_facts(load("ib_eth"))}
    assert nics["ib0"].rdma and nics["ens2f0np0"].rdma and not nics["eth0"].rdma
    assert nics["ib0"].speed_mbps == 200000 and nics["ib1"].speed_mbps is None
    assert not nics["ib1"].up


def test_tunnels_and_overlay_bridge() -> None:
    assert kinds("overlay_tunnels") == {
        "cni0": "container-bridge",
        "ens5": "physical",
        "flannel.1": "tunnel",
        "lo": "loopback",
        "tailscale0": "tunnel",
        "wg0": "tunnel",
    }


def test_link_local_and_ipv6_only_fixtures() -> None:
    ll = {n.name: n for n in nics_from_facts(load("link_local_only"))}
    assert all(a.is_link_local for a in ll["eth0"].addresses) and len(ll["eth0"].addresses) == 2
    v6 = {n.name: n for n in nics_from_facts(load("ipv6_only"))}
    assert v6["eth0"].ipv4 == ()
    assert [a.address for a in v6["eth0"].ipv6] == ["fd00:10::5", "2001:db8:1::5", "fe80::81b:2cff:fe3d:4e5f"]


def test_recorded_vm_has_virtual_ifb_devices() -> None:
    nics = {n.name: n for n in nics_from_facts(load("vm_virtio_ifb"))}
    assert nics["eth0"].kind is NicKind.PHYSICAL and nics["eth0"].driver == "virtio_net"
    assert nics["ifb0"].kind is NicKind.VIRTUAL and not nics["ifb0"].up
    assert nics["eth0"].speed_mbps is None  # the recording has speed -1: unknown


@pytest.mark.parametrize(
    ("name", "fact", "kind"),
    [
        ("lo", {"type": 772}, NicKind.LOOPBACK),
        ("weird", {"flags": ["UP", "LOOPBACK"]}, NicKind.LOOPBACK),
        ("ib0", {"type": 32, "device": True}, NicKind.INFINIBAND),
        ("docker0", {}, NicKind.CONTAINER_BRIDGE),  # name alone, nothing contradicting it
        ("docker0", {"driver": "veth"}, NicKind.VETH),  # a veth someone named docker0
        ("br-0123456789ab", {"bridge": True}, NicKind.CONTAINER_BRIDGE),
        ("br-lan", {"bridge": True}, NicKind.BRIDGE),
        ("br0", {"devtype": "bridge"}, NicKind.BRIDGE),
        ("br0", {"linkinfo_kind": "bridge"}, NicKind.BRIDGE),
        ("vethab", {"linkinfo_kind": "veth"}, NicKind.VETH),
        ("tap0", {"tun": True}, NicKind.TUNNEL),
        ("gre1", {"type": 778}, NicKind.TUNNEL),
        ("sit0", {"type": 776}, NicKind.TUNNEL),
        ("ipip0", {"linkinfo_kind": "ipip"}, NicKind.TUNNEL),
        ("eth0", {"device": True, "driver": "virtio_net"}, NicKind.PHYSICAL),
        ("dummy0", {"driver": "dummy"}, NicKind.VIRTUAL),
        ("bond0", {"devtype": "bond"}, NicKind.VIRTUAL),
    ],
)
def test_classify_rules(name: str, fact: dict[str, Any], kind: NicKind) -> None:
    assert classify(name, fact) is kind


def test_a_plain_bridge_on_dockers_subnet_is_a_container_bridge() -> None:
    on_docker = (Address("ipv4", "172.17.0.1", 16),)
    assert classify("mybr", {"bridge": True}, on_docker) is NicKind.CONTAINER_BRIDGE
    assert classify("mybr", {"bridge": True}, (Address("ipv4", "10.0.0.1", 24),)) is NicKind.BRIDGE


def test_up_needs_admin_up_and_a_live_link() -> None:
    facts = {
        "interfaces": {
            "a": {"flags": ["UP"], "operstate": "up"},
            "b": {"flags": ["UP"], "operstate": "lowerlayerdown"},
            "c": {"flags": [], "operstate": "up"},
            "d": {"flags": ["UP"], "operstate": "UNKNOWN"},
        }
    }
    assert [(n.name, n.up) for n in nics_from_facts(facts)] == [
        ("a", True), ("b", False), ("c", False), ("d", True)
    ]  # fmt: skip


def test_facts_are_sorted_by_name_deduplicated_and_ipv4_first() -> None:
    facts = {
        "interfaces": {
            "zeta": {"addresses": [
                {"family": "ipv6", "address": "fd00::1", "prefixlen": 64},
                {"family": "ipv4", "address": "10.0.0.9", "prefixlen": 24},
                {"family": "ipv4", "address": "10.0.0.2", "prefixlen": 24},
                {"family": "ipv4", "address": "10.0.0.9", "prefixlen": 24},
                {"family": "ipv6", "address": "fe80::1%zeta", "prefixlen": 64},
            ]},
            "alpha": {"speed": -1, "mtu": "9000"},
        }
    }  # fmt: skip
    alpha, zeta = nics_from_facts(facts)
    assert (alpha.name, zeta.name) == ("alpha", "zeta")
    assert alpha.speed_mbps is None and alpha.mtu == 9000
    # IPv4 first, kernel order kept inside a family (the primary address first), zone dropped
    assert [a.address for a in zeta.addresses] == ["10.0.0.9", "10.0.0.2", "fd00::1", "fe80::1"]


def test_facts_without_interfaces_are_rejected() -> None:
    with pytest.raises(ValueError, match="interfaces"):
        nics_from_facts({"format": "x"})


# ---- the reader, against a fake /sys/class/net ----------------------------------------------


def _fake_sysfs(root: Path) -> Path:
    devices = root / "devices"
    net = root / "class" / "net"
    net.mkdir(parents=True)

    def iface(name: str, files: dict[str, str], *, device_driver: str | None = None,
              dirs: tuple[str, ...] = (), master: str | None = None) -> None:  # fmt: skip
        path = net / name
        path.mkdir()
        for key, value in files.items():
            (path / key).write_text(value + "\n")
        for sub in dirs:
            (path / sub).mkdir()
        if device_driver:
            dev = devices / f"pci-{name}"
            (dev / "infiniband").mkdir(parents=True)
            driver = devices / "drivers" / device_driver
            driver.mkdir(parents=True, exist_ok=True)
            os.symlink(driver, dev / "driver")
            os.symlink(dev, path / "device")
        if master:
            os.symlink(net / master, path / "master")

    base = {"operstate": "up", "mtu": "1500", "address": "02:00:00:00:00:01", "uevent": "INTERFACE=x"}
    iface("eth0", {**base, "type": "1", "flags": "0x1003", "speed": "25000", "ifindex": "2"},
          device_driver="mlx5_core")  # fmt: skip
    iface("br0", {**base, "type": "1", "flags": "0x1003", "ifindex": "3",
                  "uevent": "DEVTYPE=bridge\nINTERFACE=br0"}, dirs=("bridge",))  # fmt: skip
    iface("vethx", {**base, "type": "1", "flags": "0x1003", "speed": "-1", "ifindex": "4"},
          dirs=("brport",), master="br0")  # fmt: skip
    iface("lo", {**base, "type": "772", "flags": "0x9", "operstate": "unknown", "ifindex": "1"})
    return net


def _snic(family: socket.AddressFamily, address: str, netmask: str | None) -> SimpleNamespace:
    return SimpleNamespace(family=family, address=address, netmask=netmask)


def test_collect_facts_reads_sysfs_and_folds_alias_labels(tmp_path: Path) -> None:
    net = _fake_sysfs(tmp_path)
    addrs = {
        "eth0": [
            _snic(socket.AF_INET, "10.0.0.2", "255.255.255.0"),
            _snic(socket.AF_INET6, "fe80::1%eth0", "ffff:ffff:ffff:ffff::"),
            _snic(socket.AF_PACKET, "02:00:00:00:00:01", None),
        ],
        "eth0:1": [_snic(socket.AF_INET, "10.0.1.2", "255.255.0.0")],  # an `ip addr ... label eth0:1`
        "lo": [_snic(socket.AF_INET, "127.0.0.1", "255.0.0.0")],
        "tun9": [_snic(socket.AF_INET, "10.9.0.1", None)],  # no sysfs entry: psutil stats only
    }
    drivers = {"eth0": "mlx5_core", "br0": "bridge", "vethx": "veth"}
    facts = collect_facts_from(str(net), lambda: addrs, drivers.get)
    assert facts["format"] == "ddpkit.net-facts/1"
    assert sorted(facts["interfaces"]) == ["br0", "eth0", "lo", "tun9", "vethx"]
    eth0 = facts["interfaces"]["eth0"]
    assert eth0["flags"] == ["UP", "BROADCAST", "MULTICAST"]
    assert eth0["device"] and eth0["device_driver"] == "mlx5_core" and eth0["rdma"]
    assert [(a["address"], a["prefixlen"]) for a in eth0["addresses"]] == [
        ("10.0.0.2", 24), ("fe80::1", 64), ("10.0.1.2", 16)
    ]  # fmt: skip
    assert facts["interfaces"]["br0"]["bridge"] and facts["interfaces"]["br0"]["devtype"] == "bridge"
    assert facts["interfaces"]["vethx"]["master"] == "br0"
    assert facts["interfaces"]["tun9"]["addresses"][0]["prefixlen"] == 32
    nics = {n.name: n for n in nics_from_facts(facts)}
    assert {k: n.kind.value for k, n in nics.items()} == {
        "br0": "bridge", "eth0": "physical", "lo": "loopback", "tun9": "virtual", "vethx": "veth"
    }  # fmt: skip
    assert nics["eth0"].speed_mbps == 25000 and nics["vethx"].speed_mbps is None
    assert json.loads(json.dumps(facts)) == facts  # plain JSON: fixtures are recorded like this


# ---- this machine -----------------------------------------------------------------------------


def test_discover_on_this_machine_is_sorted_and_has_loopback() -> None:
    nics = discover()
    names = [n.name for n in nics]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert set(names) == set(os.listdir("/sys/class/net"))
    lo = next(n for n in nics if n.kind is NicKind.LOOPBACK)
    assert any(a.address == "127.0.0.1" for a in lo.ipv4)
    for nic in nics:
        mtu = int(Path(f"/sys/class/net/{nic.name}/mtu").read_text())
        assert nic.mtu == mtu


def test_collect_facts_round_trips_through_json() -> None:
    facts = collect_facts()
    again = nics_from_facts(json.loads(json.dumps(facts)))
    assert again == nics_from_facts(facts)
