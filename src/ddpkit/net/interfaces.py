"""Network interface facts: what each interface is (kind), its state, addresses, MTU and speed.

Two layers, so that every decision can be tested from recorded data:

* :func:`collect_facts` is the I/O edge: it reads ``/sys/class/net/<if>/`` (type, flags, operstate,
  mtu, speed, the ``device``/``bridge``/``brport``/``master`` entries, ``uevent``), asks the kernel
  for each interface's driver (the ``ethtool -i`` ioctl) and takes addresses from ``psutil``. The
  result is a plain JSON-able dict (the format of ``tests/fixtures/net/*.json``).
* :func:`nics_from_facts` is pure: it turns such a dict into :class:`Nic` values, classifying each
  interface into a :class:`NicKind`.

:func:`discover` is the two together for this machine.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

FACTS_FORMAT = "ddpkit.net-facts/1"
SYSFS_NET = "/sys/class/net"

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

# net_device flags as /sys/class/net/<if>/flags shows them (include/uapi/linux/if.h).
IFF_NAMES = (
    (0x1, "UP"),
    (0x2, "BROADCAST"),
    (0x8, "LOOPBACK"),
    (0x10, "POINTOPOINT"),
    (0x40, "RUNNING"),
    (0x80, "NOARP"),
    (0x100, "PROMISC"),
    (0x400, "MASTER"),
    (0x800, "SLAVE"),
    (0x1000, "MULTICAST"),
)

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


@dataclass(frozen=True)
class Address:
    """One address on an interface, without its zone (``fe80::1``, not ``fe80::1%eth0``)."""

    family: Literal["ipv4", "ipv6"]
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
        return {"family": self.family, "address": self.address, "prefixlen": self.prefixlen}


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
        family: Literal["ipv4", "ipv6"] = "ipv4" if ip.version == 4 else "ipv6"
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
# I/O: this machine -> facts

AddressSource = Callable[[], Mapping[str, Sequence[Any]]]
DriverSource = Callable[[str], "str | None"]


def discover() -> tuple[Nic, ...]:
    """Every network interface of this machine (this network namespace), sorted by name."""
    return nics_from_facts(collect_facts())


def collect_facts(
    sysfs: str = SYSFS_NET,
    if_addrs: AddressSource | None = None,
    driver_of: DriverSource | None = None,
) -> dict[str, Any]:
    """The raw facts :func:`discover` classifies, as a JSON-able dict (record fixtures with it).

    ``sysfs``, ``if_addrs`` (psutil.net_if_addrs-shaped) and ``driver_of`` are injectable so the
    reader itself can be tested against a fake tree.
    """
    if if_addrs is None:
        import psutil

        if_addrs = psutil.net_if_addrs
    if driver_of is None:
        driver_of = ethtool_driver
    names = set(_listdir(sysfs))
    by_name = _addresses_by_interface(if_addrs(), names)
    interfaces: dict[str, dict[str, Any]] = {}
    for name in sorted(names | set(by_name)):
        fact = _sysfs_facts(os.path.join(sysfs, name)) if name in names else _psutil_stats(name)
        fact["driver"] = driver_of(name) or fact.get("device_driver")
        fact["addresses"] = by_name.get(name, [])
        interfaces[name] = fact
    return {"format": FACTS_FORMAT, "interfaces": interfaces}


def _sysfs_facts(path: str) -> dict[str, Any]:
    flags = _int_or_none(_read(path, "flags", base=16))
    uevent = dict(
        line.split("=", 1) for line in (_read(path, "uevent") or "").splitlines() if "=" in line
    )
    device = os.path.join(path, "device")
    device_driver = os.path.join(device, "driver")
    master = os.path.join(path, "master")
    return {
        "ifindex": _int_or_none(_read(path, "ifindex")),
        "type": _int_or_none(_read(path, "type")),
        "flags": [n for bit, n in IFF_NAMES if flags is not None and flags & bit],
        "operstate": _read(path, "operstate"),
        "mtu": _int_or_none(_read(path, "mtu")),
        "speed": _int_or_none(_read(path, "speed")),
        "mac": _read(path, "address") or None,
        "device": os.path.exists(device),
        "device_driver": os.path.basename(os.readlink(device_driver))
        if os.path.islink(device_driver)
        else None,
        "bridge": os.path.isdir(os.path.join(path, "bridge")),
        "brport": os.path.isdir(os.path.join(path, "brport")),
        "master": os.path.basename(os.readlink(master)) if os.path.islink(master) else None,
        "tun": os.path.exists(os.path.join(path, "tun_flags")),
        "devtype": uevent.get("DEVTYPE"),
        "rdma": os.path.isdir(os.path.join(device, "infiniband")),
    }


def _psutil_stats(name: str) -> dict[str, Any]:
    """Facts for an interface that has addresses but no sysfs entry (not Linux, or no /sys)."""
    import psutil

    stats = psutil.net_if_stats().get(name)
    if stats is None:
        return {"flags": []}
    flags = [f.upper() for f in str(getattr(stats, "flags", "")).split(",") if f]
    if stats.isup and "UP" not in flags:
        flags.append("UP")
    return {"flags": flags, "mtu": stats.mtu, "speed": stats.speed or None}


def _addresses_by_interface(
    raw: Mapping[str, Sequence[Any]], sysfs_names: set[str]
) -> dict[str, list[dict[str, Any]]]:
    """psutil's addresses per interface; ``eth0:1``-style alias labels fold into ``eth0``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for label in sorted(raw):
        base = label.split(":", 1)[0]
        name = base if ":" in label and base in sysfs_names else label
        entries = out.setdefault(name, [])
        for snic in raw[label]:
            family_name = getattr(snic.family, "name", str(snic.family))
            if family_name not in ("AF_INET", "AF_INET6"):
                continue
            text = str(snic.address).split("%", 1)[0]
            entries.append(
                {
                    "family": "ipv4" if family_name == "AF_INET" else "ipv6",
                    "address": text,
                    "prefixlen": _prefixlen(snic.netmask, ipaddress.ip_address(text).max_prefixlen),
                }
            )
    return out


def _prefixlen(netmask: str | None, max_len: int) -> int:
    if not netmask:
        return max_len
    return bin(int(ipaddress.ip_address(netmask.split("%", 1)[0]))).count("1")


def ethtool_driver(name: str) -> str | None:
    """The driver name ``ethtool -i NAME`` would print (veth, bridge, virtio_net...), or None."""
    import array
    import fcntl
    import socket
    import struct

    siocethtool, ethtool_gdrvinfo = 0x8946, 0x3
    # struct ethtool_drvinfo: u32 cmd, then driver[32] ... (196 bytes in all).
    buf = array.array("B", struct.pack("I", ethtool_gdrvinfo) + bytes(192))
    ifreq = struct.pack("16sP", name.encode()[:15], buf.buffer_info()[0])
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            fcntl.ioctl(sock.fileno(), siocethtool, ifreq)
    except OSError:
        return None
    driver = buf.tobytes()[4:36].split(b"\0", 1)[0].decode(errors="replace")
    return driver or None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _read(path: str, name: str, base: int = 10) -> str | None:
    try:
        with open(os.path.join(path, name), encoding="ascii", errors="replace") as handle:
            text = handle.read().strip()
    except OSError:  # e.g. `speed` on a link without carrier: EINVAL
        return None
    if base == 16 and text.startswith("0x"):
        return str(int(text, 16))
    return text
