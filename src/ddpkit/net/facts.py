"""Reading this machine's interface facts: ``/sys/class/net``, the ethtool ioctl, psutil.

The I/O edge behind :func:`ddpkit.net.interfaces.collect_facts`; everything it returns is plain,
JSON-able data that :func:`ddpkit.net.interfaces.nics_from_facts` classifies.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ddpkit.net.iproute import RunIp, run_ip_command

FACTS_FORMAT = "ddpkit.net-facts/1"
TUN_DEVICE = "/dev/net/tun"


def tun_device_exists(path: str = TUN_DEVICE) -> bool:
    """Does this node have the TUN device an overlay network (WireGuard, Tailscale, ZeroTier)
    needs? Most rented containers do not."""
    return os.path.exists(path)


SYSFS_NET = "/sys/class/net"

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


AddressSource = Callable[[], Mapping[str, Sequence[Any]]]
DriverSource = Callable[[str], "str | None"]


def collect_facts(
    sysfs: str = SYSFS_NET,
    if_addrs: AddressSource | None = None,
    driver_of: DriverSource | None = None,
) -> dict[str, Any]:
    """This machine's interface facts as a JSON-able dict (the format of tests/fixtures/net).

    ``sysfs``, ``if_addrs`` (psutil.net_if_addrs-shaped) and ``driver_of`` are injectable so the
    reader itself can be tested against a fake tree.
    """
    if driver_of is None:
        driver_of = ethtool_driver
    names = set(_listdir(sysfs))
    by_name = ip_addresses() if if_addrs is None else None
    if by_name is None:  # no iproute2 here (or injected): psutil's view of the same addresses
        if if_addrs is None:
            import psutil

            if_addrs = psutil.net_if_addrs
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


def ip_addresses(run_ip: RunIp = run_ip_command) -> dict[str, list[dict[str, Any]]] | None:
    """Every interface's IPv4 and IPv6 addresses from ``ip -j addr show`` (iproute2, which the
    route lookup needs anyway, so ``nics`` never pays for importing psutil), or None when ``ip``
    is missing, fails or answers with something unreadable."""
    try:
        rows = json.loads(run_ip(["ip", "-j", "addr", "show"]))
    except (OSError, ValueError):
        return None
    if not isinstance(rows, list):
        return None
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("ifname"), str):
            return None
        entries = out.setdefault(row["ifname"], [])
        for info in row.get("addr_info") or []:
            family = {"inet": "ipv4", "inet6": "ipv6"}.get(str(info.get("family")))
            local, prefixlen = info.get("local"), info.get("prefixlen")
            if family is None or not isinstance(local, str) or not isinstance(prefixlen, int):
                continue
            entries.append({"family": family, "address": local.split("%", 1)[0],
                            "prefixlen": prefixlen})
    return out


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


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
