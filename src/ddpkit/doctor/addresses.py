"""Which addresses and interface names peers on other machines can (probably) not reach.

Pure functions over the strings logs print; no I/O. Used by the log rules to tell a wrong
interface (loopback, container bridge, link-local, tunnel) from a routable one.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
import re

from ddpkit.i18n import _

# Docker's default bridge network: the container side of NAT, frequently the same address on
# every rented instance (172.17.0.4 in the seed page's log).
_DOCKER_DEFAULT = ipaddress.ip_network("172.17.0.0/16")

_BRIDGE_NAMES = re.compile(r"^(docker|br-|veth|virbr|cni|flannel|cali|vxlan|weave|kube-)")
_TUNNEL_NAMES = re.compile(r"^(tun|tap|wg|tailscale|zt|ppp|ipsec|gre|nebula)")

UNREACHABLE_KINDS = ("loopback", "container-bridge", "link-local", "tunnel")


class AddressClass(enum.Enum):
    """The class of an address as a log prints it (doctor/log/facts reads these from lines)."""

    LOOPBACK = "loopback"  # 127.0.0.0/8, ::1, localhost (Debian's 127.0.1.1 hostname line)
    LINK_LOCAL = "link-local"  # 169.254.0.0/16, fe80::/10
    CONTAINER_BRIDGE = "container-bridge"  # Docker's default bridge 172.17.0.0/16
    PRIVATE = "private"  # RFC 1918, RFC 6598 (100.64/10), ULA fc00::/7
    PUBLIC = "public"
    UNSPECIFIED = "unspecified"  # 0.0.0.0, :: (a server's "any address": no peer dials it)


_CGNAT = ipaddress.ip_network("100.64.0.0/10")


@functools.lru_cache(maxsize=1024)
def address_class(address: str) -> AddressClass | None:
    """The class of an address as printed (brackets and an IPv6 scope allowed); ``localhost``
    is loopback; None for a text that is no address."""
    text = address.strip().strip("[]").split("%", 1)[0]
    if text.lower() in ("localhost", "localhost.localdomain"):
        return AddressClass.LOOPBACK
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified:
        return AddressClass.UNSPECIFIED
    if ip.is_loopback:
        return AddressClass.LOOPBACK
    if ip.is_link_local:
        return AddressClass.LINK_LOCAL
    if isinstance(ip, ipaddress.IPv4Address) and ip in _DOCKER_DEFAULT:
        return AddressClass.CONTAINER_BRIDGE
    if ip.is_private or (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT):
        return AddressClass.PRIVATE
    return AddressClass.PUBLIC


_KIND_OF_CLASS = {
    AddressClass.LOOPBACK: "loopback", AddressClass.UNSPECIFIED: "loopback",
    AddressClass.LINK_LOCAL: "link-local", AddressClass.CONTAINER_BRIDGE: "container-bridge",
    AddressClass.PRIVATE: "routable", AddressClass.PUBLIC: "routable",
}


@functools.lru_cache(maxsize=1024)
def address_kind(address: str, interface: str | None = None) -> str:
    """``loopback``, ``container-bridge``, ``link-local``, ``tunnel``, ``routable`` or ``unknown``.

    ``address`` may carry an IPv6 scope (``fe80::1%eth0``) or brackets; ``interface`` is the
    name the log paired it with, when known.
    """
    name = (interface or "").strip()
    if name == "lo" or name.startswith("lo:"):
        return "loopback"
    if _BRIDGE_NAMES.match(name):
        return "container-bridge"
    if _TUNNEL_NAMES.match(name):
        return "tunnel"
    found = address_class(address)
    return "unknown" if found is None else _KIND_OF_CLASS[found]


def is_unreachable(address: str, interface: str | None = None) -> bool:
    """True for the address kinds another machine cannot (normally) connect to."""
    return address_kind(address, interface) in UNREACHABLE_KINDS


_KIND_WORDS = {
    "loopback": _("a loopback address"),
    "container-bridge": _("a container/NAT bridge address (Docker's default 172.17.0.0/16)"),
    "link-local": _("a link-local address"),
    "tunnel": _("a tunnel interface"),
    "routable": _("a routable address"),
    "unknown": _("an address"),
}


def describe_kind(address: str, interface: str | None = None) -> str:
    """A few plain words for the kind of ``address`` (for explanations)."""
    return _KIND_WORDS[address_kind(address, interface)]


def normalise_address(address: str) -> str:
    """The address as a comparable key: no brackets, no IPv6 scope, lower case."""
    return address.strip().strip("[]").split("%", 1)[0].lower()
