"""Network interface facts: what each interface is (kind), its state, addresses, MTU and speed.

Two layers, so that every decision can be tested from recorded data:

* :func:`collect_facts` is the I/O edge (:mod:`ddpkit.net.facts`): it reads
  ``/sys/class/net/<if>/`` (type, flags, operstate, mtu, speed, the ``device``/``bridge``/
  ``brport``/``master`` entries, ``uevent``), asks the kernel for each interface's driver (the
  ``ethtool -i`` ioctl) and takes addresses from ``psutil``. The result is a plain JSON-able
  dict (the format of ``tests/fixtures/net/*.json``).
* :func:`nics_from_facts` is pure: it turns such a dict into :class:`Nic` values, classifying each
  interface into a :class:`NicKind`.

:func:`discover` is the two together for this machine.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from ddpkit.i18n import _

# Linux ARPHRD_* link types (include/uapi/linux/if_arp.h) that decide a kind on their own.
ARPHRD_INFINIBAND = 32
ARPHRD_LOOPBACK = 772
ARPHRD_TUNNEL_TYPES = {
    512: "ppp",
    768: "ipip",
    769: "ip6tnl",
    776: "sit",
    778: "gre",
    823: "ip6gre",
    65534: "none (tun/wireguard)",
}

DOCKER_DEFAULT_SUBNET = ipaddress.IPv4Network("172.17.0.0/16")
# RFC 1918 plus the shared (CGNAT) range some clouds use for their private networks.
PRIVATE_IPV4 = tuple(
    ipaddress.IPv4Network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
UNIQUE_LOCAL_IPV6 = ipaddress.IPv6Network("fc00::/7")

# Host-local NAT bridges made by container and VM runtimes: docker0, docker's per-network
# br-<12 hex>, CNI, podman, LXC/LXD, libvirt, kube-router.
CONTAINER_BRIDGE_NAME = re.compile(
    r"^(docker\d+|br-[0-9a-f]{12}|cni\d*|cni-.+|podman\d+|lxcbr\d+|lxdbr\d+|virbr\d+|kube-bridge|cbr0)$"
)
TUNNEL_DRIVERS = {
    "tun", "tap", "wireguard", "ipip", "ip_gre", "gre", "gretap", "ip6_gre", "ip6gre", "sit",
    "ip6_tunnel", "ip6tnl", "vxlan", "geneve", "ip_vti", "ip6_vti", "vti", "ppp",
}  # fmt: skip
TUNNEL_DEVTYPES = {"wireguard", "vxlan", "geneve", "ppp"}
AddressFamily = Literal["ipv4", "ipv6"]


class NicKind(str, Enum):
    """What an interface is, as far as choosing it for inter-node traffic is concerned."""

    LOOPBACK = "loopback"
    PHYSICAL = "physical"  # backed by a device: a real NIC, a virtio/ENA/VF NIC of a VM
    VETH = "veth"  # one end of a virtual Ethernet pair (a container's eth0 usually is one)
    BRIDGE = "bridge"
    CONTAINER_BRIDGE = "container-bridge"  # docker0, br-<id>, cni0, virbr0...: host-local NAT
    INFINIBAND = "infiniband"  # IPoIB (link type 32)
    TUNNEL = "tunnel"  # tun/tap, wireguard, ipip, gre, sit, vxlan, geneve
    VIRTUAL = "virtual"  # anything else without a device: dummy, ifb, vlan, bond, macvlan...

    def word(self) -> str:
        """The kind in the user's words (``value`` is the stable id of --json)."""
        return _KIND_WORDS[self]


_KIND_WORDS: dict[NicKind, str] = {
    NicKind.LOOPBACK: _("loopback"), NicKind.PHYSICAL: _("physical"), NicKind.VETH: "veth",
    NicKind.BRIDGE: _("bridge"), NicKind.CONTAINER_BRIDGE: _("container-bridge"),
    NicKind.INFINIBAND: "infiniband", NicKind.TUNNEL: _("tunnel"), NicKind.VIRTUAL: _("virtual"),
}


@dataclass(frozen=True)
class Address:
    """One address on an interface, without its zone (``fe80::1``, not ``fe80::1%eth0``)."""

    family: AddressFamily
    address: str
    prefixlen: int

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        return ipaddress.ip_address(self.address)

    @property
    def is_loopback(self) -> bool:
        return self.ip.is_loopback

    @property
    def is_link_local(self) -> bool:
        return self.ip.is_link_local

    @property
    def is_private(self) -> bool:
        """RFC 1918 / CGNAT IPv4, or an IPv6 unique-local address (never loopback or link-local)."""
        ip = self.ip
        if isinstance(ip, ipaddress.IPv4Address):
            return any(ip in net for net in PRIVATE_IPV4)
        return ip in UNIQUE_LOCAL_IPV6

    @property
    def is_routable(self) -> bool:
        """Usable to talk to another machine: not loopback, link-local, unspecified or multicast."""
        ip = self.ip
        return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)

    @property
    def in_docker_default_subnet(self) -> bool:
        ip = self.ip
        return isinstance(ip, ipaddress.IPv4Address) and ip in DOCKER_DEFAULT_SUBNET

    @property
    def with_prefix(self) -> str:
        return f"{self.address}/{self.prefixlen}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Nic:
    """One network interface of a machine."""

    name: str
    kind: NicKind
    up: bool  # administratively up and the link is not down (operstate up or unknown)
    mtu: int | None
    speed_mbps: int | None  # None where the kernel does not know (virtual links report -1)
    addresses: tuple[Address, ...]
    mac: str | None = None
    driver: str | None = None  # as `ethtool -i` reports it: virtio_net, veth, bridge, mlx5_core...
    ifindex: int | None = None
    operstate: str | None = None  # /sys/class/net/<if>/operstate: up, down, unknown, dormant...
    master: str | None = None  # the bridge/bond this interface is enslaved to
    rdma: bool = False  # the device also has an RDMA (InfiniBand verbs / RoCE) side
    flags: tuple[str, ...] = ()  # IFF_* names: UP, RUNNING, LOOPBACK...

    @property
    def ipv4(self) -> tuple[Address, ...]:
        return tuple(a for a in self.addresses if a.family == "ipv4")

    @property
    def ipv6(self) -> tuple[Address, ...]:
        return tuple(a for a in self.addresses if a.family == "ipv6")

    @property
    def routable(self) -> tuple[Address, ...]:
        """Addresses another machine could use (IPv4 first)."""
        return tuple(a for a in self.addresses if a.is_routable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "up": self.up,
            "operstate": self.operstate,
            "mtu": self.mtu,
            "speed_mbps": self.speed_mbps,
            "mac": self.mac,
            "driver": self.driver,
            "ifindex": self.ifindex,
            "master": self.master,
            "rdma": self.rdma,
            "flags": list(self.flags),
            "addresses": [a.to_dict() for a in self.addresses],
        }


# --------------------------------------------------------------------------------------------
# Pure: facts -> Nic


def nics_from_facts(facts: Mapping[str, Any]) -> tuple[Nic, ...]:
    """The interfaces described by recorded facts (the format :func:`collect_facts` returns)."""
    interfaces = facts.get("interfaces")
    if not isinstance(interfaces, Mapping):
        raise ValueError("net facts need an 'interfaces' mapping of name -> facts")
    return tuple(nic_from_facts(name, interfaces[name]) for name in sorted(interfaces))


def nic_from_facts(name: str, fact: Mapping[str, Any]) -> Nic:
    addresses = _addresses(fact.get("addresses") or ())
    flags = tuple(str(f).upper() for f in fact.get("flags") or ())
    operstate = fact.get("operstate")
    operstate = str(operstate).lower() if operstate is not None else None
    admin_up = "UP" in flags
    up = admin_up and operstate in (None, "up", "unknown")
    speed = fact.get("speed")
    return Nic(
        name=name,
        kind=classify(name, fact, addresses),
        up=up,
        mtu=_int_or_none(fact.get("mtu")),
        speed_mbps=speed if isinstance(speed, int) and speed > 0 else None,
        addresses=addresses,
        mac=fact.get("mac"),
        driver=fact.get("driver") or fact.get("device_driver"),
        ifindex=_int_or_none(fact.get("ifindex")),
        operstate=operstate,
        master=fact.get("master"),
        rdma=bool(fact.get("rdma")),
        flags=flags,
    )


def classify(name: str, fact: Mapping[str, Any], addresses: Sequence[Address] = ()) -> NicKind:
    """The kind of one interface from its facts. First match wins, in this order:

    loopback (link type 772 / IFF_LOOPBACK) > InfiniBand (link type 32) > container bridge (a
    runtime's bridge name, or a bridge holding 172.17.0.0/16) > bridge > veth > tunnel > physical
    (has a ``device``) > virtual.
    """
    link_type = _int_or_none(fact.get("type"))
    flags = {str(f).upper() for f in fact.get("flags") or ()}
    driver = str(fact.get("driver") or "").lower()
    link_kind = str(fact.get("linkinfo_kind") or "").lower()
    devtype = str(fact.get("devtype") or "").lower()
    is_bridge = bool(fact.get("bridge")) or "bridge" in (driver, link_kind, devtype)

    if link_type == ARPHRD_LOOPBACK or "LOOPBACK" in flags:
        return NicKind.LOOPBACK
    if link_type == ARPHRD_INFINIBAND:
        return NicKind.INFINIBAND
    if CONTAINER_BRIDGE_NAME.match(name) and (is_bridge or not (driver or link_kind)):
        return NicKind.CONTAINER_BRIDGE
    if is_bridge:
        if any(a.in_docker_default_subnet for a in addresses):
            return NicKind.CONTAINER_BRIDGE
        return NicKind.BRIDGE
    if "veth" in (driver, link_kind):
        return NicKind.VETH
    if (
        fact.get("tun")
        or driver in TUNNEL_DRIVERS
        or link_kind in TUNNEL_DRIVERS
        or devtype in TUNNEL_DEVTYPES
        or link_type in ARPHRD_TUNNEL_TYPES
    ):
        return NicKind.TUNNEL
    if fact.get("device"):
        return NicKind.PHYSICAL
    return NicKind.VIRTUAL


def _addresses(raw: Sequence[Mapping[str, Any]]) -> tuple[Address, ...]:
    parsed: list[Address] = []
    seen: set[tuple[str, int]] = set()
    for item in raw:
        text = str(item["address"]).split("%", 1)[0]
        ip = ipaddress.ip_address(text)
        family: AddressFamily = "ipv4" if ip.version == 4 else "ipv6"
        prefixlen = int(item.get("prefixlen", ip.max_prefixlen))
        key = (ip.compressed, prefixlen)
        if key in seen:
            continue
        seen.add(key)
        parsed.append(Address(family, ip.compressed, prefixlen))
    # IPv4 first; inside a family keep the kernel's order (the primary address comes first).
    return tuple(sorted(parsed, key=lambda a: a.family != "ipv4"))


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------------
# I/O: this machine


def discover() -> tuple[Nic, ...]:
    """Every network interface of this machine (this network namespace), sorted by name."""
    return nics_from_facts(collect_facts())


def collect_facts() -> dict[str, Any]:
    """The raw facts :func:`discover` classifies, as a JSON-able dict (record fixtures with it).

    Reads /sys/class/net, the ethtool driver ioctl and psutil (see :mod:`ddpkit.net.facts`).
    """
    from ddpkit.net.facts import collect_facts as collect

    return collect()


def interface_holding(address: str, nics: Sequence[Nic]) -> Nic | None:
    """The first interface (in the given order) that holds ``address``, or None."""
    for nic in nics:
        if any(same_ip(address, a.address) for a in nic.addresses):
            return nic
    return None


def same_ip(left: str, right: str) -> bool:
    """Whether two address strings are one IP address (a %zone suffix ignored)."""
    try:
        return ipaddress.ip_address(left.split("%", 1)[0]) == ipaddress.ip_address(
            right.split("%", 1)[0]
        )
    except ValueError:
        return False
