"""Which local interface and source address this machine's routing table uses to reach a peer.

A real lookup, not a guess from names: ``ip -j route get ADDR`` (iproute2) asks the kernel; where
that is unavailable, a connected UDP socket's ``getsockname()`` gives the source address the kernel
chose (``connect`` on a datagram socket sends no packet), mapped back to the interface holding it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ddpkit.errors import ConfigError, NetworkProblem
from ddpkit.i18n import _
from ddpkit.net.interfaces import AddressFamily, Nic, NicKind, interface_holding
from ddpkit.net.iproute import IpCommandError, RunIp, run_ip_command
from ddpkit.net.ports import is_tcp_port

# What a master address may be given as that always means this machine itself.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
# Route types `ip route get` can answer with that mean "no way there".
UNROUTABLE_TYPES = {"unreachable", "blackhole", "prohibit", "throw"}

Lookup = Callable[..., Sequence[tuple[Any, ...]]]
"""``socket.getaddrinfo``-shaped: (host, port, family, type) -> [(af, type, proto, name, addr)]."""


UdpSource = Callable[[str, "int | None", str], str]
"""(address, port, zone) -> the local source address; OSError when there is no route."""


@dataclass(frozen=True)
class Route:
    """The kernel's answer for one peer."""

    host: str  # what the user asked about (name or address, without port)
    address: str  # the peer address the lookup used
    family: AddressFamily
    ifname: str  # the local interface traffic leaves through
    source: str  # the local source address the kernel picks
    gateway: str | None = None  # next hop, None when the peer is on a connected network
    local: bool = False  # the address is this machine's own
    method: Literal["ip-route-get", "udp-connect"] = "ip-route-get"  # or the fallback

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def split_host_port(spec: str) -> tuple[str, int | None]:
    """``HOST``, ``HOST:PORT``, ``[V6]:PORT``, ``[V6]`` or a bare IPv6 address -> (host, port)."""
    text = spec.strip()
    port_text: str | None = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or (end + 1 < len(text) and text[end + 1] != ":"):
            raise _bad_host(spec, _("an IPv6 address in brackets must look like {example}",
                                    example="[fd00::3]:29500"))
        host = text[1:end]
        port_text = text[end + 2 :] if end + 1 < len(text) else None
    elif text.count(":") == 1:
        host, port_text = text.split(":", 1)
    else:  # a name, an IPv4 address, or an IPv6 address without a port
        host = text
    if not host:
        raise _bad_host(spec, _("the host part is empty"))
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not is_tcp_port(int(port_text)):
        raise _bad_host(spec, _("port {port!r} is not a number from 1 to 65535", port=port_text))
    return host, int(port_text)


def _bad_host(spec: str, why: str) -> ConfigError:
    return ConfigError(
        "bad-host",
        _("cannot read {spec!r} as HOST[:PORT]: {why}", spec=spec, why=why),
        _("give a name or address, optionally with a port: {examples}",
          examples="node0, 10.0.0.2:29500, [fd00::2]:29500"),
    )


def resolve(host: str, *, lookup: Lookup | None = None) -> tuple[str, ...]:
    """The addresses ``host`` resolves to: IPv4 before IPv6, each family in numeric order.

    A literal address is returned as it is (no lookup). ``lookup`` replaces
    ``socket.getaddrinfo`` (tests). Raises ConfigError ``host-unresolvable``.
    """
    literal = _literal(host)
    if literal is not None:
        return (literal,)
    if _looks_like_an_address(host):
        raise ConfigError(
            "bad-address", _("{host!r} looks like an IP address but is not one", host=host),
            _("check each part: IPv4 is four numbers 0-255 (10.0.0.2), IPv6 is hex groups "
              "(fd00::2)"),
            details={"host": host})
    try:
        infos = (lookup or socket.getaddrinfo)(host, None, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(
            "host-unresolvable",
            _("cannot resolve {host!r}: {reason}", host=host, reason=str(exc)),
            _("check the name (`getent hosts NAME`) or give the peer's IP address instead"),
            details={"host": host},
        ) from exc
    found = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos}
    if not found:
        raise ConfigError(
            "host-unresolvable",
            _("{host!r} resolves to no IPv4 or IPv6 address", host=host),
            _("give the peer's IP address instead"),
            details={"host": host},
        )
    ordered = sorted(found, key=lambda ip: (ip.version, int(ip)))
    return tuple(ip.compressed for ip in ordered)


def _looks_like_an_address(host: str) -> bool:
    """Digits and dots (``300.1.1.1``, ``10.0.0``) or any colon (``::zz``): no host name looks
    like that, so it is a mistyped address and must never become a DNS query."""
    return ":" in host or (bool(host) and "." in host and all(c.isdigit() or c == "." for c in host))


def _literal(host: str) -> str | None:
    address, _, zone = host.partition("%")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return ip.compressed + (f"%{zone}" if zone else "")


def route_to(
    host: str,
    nics: Sequence[Nic] | None = None,
    *,
    run_ip: RunIp | None = None,
    lookup: Lookup | None = None,
    udp_source: UdpSource | None = None,
) -> Route:
    """The interface and source address this machine uses to reach ``host`` (HOST[:PORT]).

    ``nics`` (this machine's interfaces, from :func:`ddpkit.net.interfaces.discover` when omitted)
    map a source address back to its interface. The other arguments replace the real edges in
    tests: ``run_ip`` the ``ip`` subprocess (fed recorded ``ip -j route get`` output), ``lookup``
    the name resolver, ``udp_source`` the connected-UDP-socket fallback. Raises ConfigError
    ``bad-host`` / ``host-unresolvable``, NetworkProblem ``no-route``.
    """
    name, port = split_host_port(host)
    address = resolve(name, lookup=lookup)[0]
    plain, _percent, zone = address.partition("%")
    family: AddressFamily = "ipv4" if ipaddress.ip_address(plain).version == 4 else "ipv6"
    argv = ["ip", "-j"] + (["-6"] if family == "ipv6" else []) + ["route", "get", plain]
    if zone:
        argv += ["oif", zone]
    known = list(nics) if nics is not None else None

    def interfaces() -> list[Nic]:
        nonlocal known
        if known is None:
            from ddpkit.net.interfaces import discover

            known = list(discover())
        return known

    try:
        answer = parse_route_get((run_ip or run_ip_command)(argv))
    except IpCommandError as exc:
        if "RTNETLINK answers" in exc.stderr:  # the kernel's own answer: there is no route
            raise _no_route(name, plain, _describe(exc)) from exc
        ip_failure = _describe(exc)
    except (OSError, ValueError) as exc:  # no iproute2, or output we cannot read
        ip_failure = _describe(exc)
    else:
        if answer.get("type") in UNROUTABLE_TYPES:
            raise _no_route(name, plain, _("the routing table says {type}", type=answer["type"]))
        return _route_from_answer(name, plain, family, answer, interfaces)
    try:
        source = (udp_source or udp_source_address)(plain, port, zone)
    except OSError as exc:
        reason = _("{reason} (`ip route get` was no help: {failure})", reason=_describe(exc),
                   failure=ip_failure)
        raise _no_route(name, plain, reason) from exc
    return _route_from_source(name, plain, family, source, interfaces())


def parse_route_get(output: str) -> dict[str, Any]:
    """The first entry of ``ip -j route get`` output; ValueError if it is not one."""
    try:
        data = json.loads(output)
    except json.JSONDecodeError as exc:
        raise ValueError(f"`ip -j route get` printed no JSON ({exc}): {output[:200]!r}") from exc
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise ValueError(f"unexpected `ip -j route get` output: {output[:200]!r}")
    entry: dict[str, Any] = data[0]
    if not entry.get("dev"):
        raise ValueError(f"`ip -j route get` named no device: {output[:200]!r}")
    return entry


def _route_from_answer(
    host: str,
    address: str,
    family: AddressFamily,
    answer: dict[str, Any],
    interfaces: Callable[[], list[Nic]],
) -> Route:
    ifname = str(answer["dev"])
    source = answer.get("prefsrc")
    local = answer.get("type") == "local"
    if local:
        # Our own address: the kernel answers "via lo", but the interface that holds the address
        # is the one peers reach us on.
        holder = _holder(address, [n for n in interfaces() if n.kind is not NicKind.LOOPBACK])
        if holder is not None:
            ifname = holder.name
        source = address
    if not source:  # IPv6 answers can lack prefsrc; take the interface's first usable address
        nic = next((n for n in interfaces() if n.name == ifname), None)
        candidates = [a for a in (nic.addresses if nic else ()) if a.family == family]
        routable = [a for a in candidates if a.is_routable] or candidates
        if not routable:
            raise _no_route(host, address, _("{name} has no {family} address to send from",
                                             name=ifname, family=family))
        source = routable[0].address
    gateway = answer.get("gateway")
    return Route(host, address, family, ifname, str(source), str(gateway) if gateway else None,
                 local, "ip-route-get")  # fmt: skip


def udp_source_address(address: str, port: int | None, zone: str = "") -> str:
    """The source address the kernel picks for ``address``, via a connected UDP socket.

    ``connect`` on a datagram socket only consults the routing table: no packet is sent.
    """
    target: tuple[Any, ...] = (address, port or 9)
    af = socket.AF_INET
    if ipaddress.ip_address(address).version == 6:
        af = socket.AF_INET6
        target = (address, port or 9, 0, socket.if_nametoindex(zone) if zone else 0)
    with socket.socket(af, socket.SOCK_DGRAM) as sock:
        sock.connect(target)
        return str(sock.getsockname()[0]).split("%", 1)[0]


def _route_from_source(
    host: str, address: str, family: AddressFamily, source: str, nics: Sequence[Nic]
) -> Route:
    holder = _holder(source, nics)
    if holder is None:
        raise _no_route(host, address, _("source address {source} is on no interface seen here",
                                         source=source))
    local = _holder(address, nics) is not None
    if local and holder.kind is NicKind.LOOPBACK:
        holder = _holder(address, [n for n in nics if n.kind is not NicKind.LOOPBACK]) or holder
    return Route(host, address, family, holder.name, source, None, local, "udp-connect")


def _holder(address: str, nics: Sequence[Nic]) -> Nic | None:
    return interface_holding(address, nics)


def _no_route(host: str, address: str, why: str) -> NetworkProblem:
    shown = host if host == address else f"{host} ({address})"
    return NetworkProblem(
        "no-route",
        _("this machine has no route to {host}: {why}", host=shown, why=why),
        _("check `ip route` here: the peer's network must be reachable through one of this "
          "machine's interfaces (is the private-network interface up and addressed?)"),
        details={"host": host, "address": address},
    )


def _describe(exc: BaseException) -> str:
    stderr = getattr(exc, "stderr", None)
    if stderr:
        return str(stderr).strip().splitlines()[-1]
    return str(exc) or type(exc).__name__
