"""What a simulated cluster should look like (``SimSpec``) and the parsing of its flag values.

Pure: constructing a ``SimSpec`` validates and normalises it, so an invalid spec cannot exist and two
specs that mean the same cluster compare equal (``1Gbit`` == ``1gbit``, ``{1: "eth1"}`` == ``{}``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ddpkit.errors import ConfigError
from ddpkit.i18n import _

DEFAULT_NAME = "ddpkit"
DEFAULT_SUBNET = "10.0.0.0/24"
DEFAULT_PRIVATE_IFNAME = "eth1"
PUBLIC_IFNAME = "eth0"
PUBLIC_ADDRESS = "172.17.0.4"  # the same container/NAT address on every node, as on rented instances
PUBLIC_PREFIXLEN = 16
MAX_NODES = 64
NAME_MAX = 6

_NAME_RE = re.compile(rf"[a-z][a-z0-9]{{0,{NAME_MAX - 1}}}")
_IFNAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,14}")
_RATE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)", re.IGNORECASE)
_DELAY_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(us|ms|s)", re.IGNORECASE)
_LOSS_RE = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_DELAY_UNITS_US = {"us": 1, "ms": 1000, "s": 1_000_000}
MIN_RATE_BITS = 64 * 10**3
MAX_RATE_BITS = 400 * 10**9
MAX_DELAY_US = 10 * 1_000_000
_RESERVED_IFNAMES = frozenset({"lo", PUBLIC_IFNAME})
_PUBLIC_NETWORK = ipaddress.ip_network(f"{PUBLIC_ADDRESS}/{PUBLIC_PREFIXLEN}", strict=False)


@dataclass(frozen=True)
class SimSpec:
    """A cluster of ``nodes`` network-namespace nodes named ``name``.

    ``subnet`` is the private network (host .1, node I at .2+I); ``rate`` (tc syntax, e.g. ``1gbit``)
    shapes every private NIC in both directions; ``ifnames`` maps a node index to its private NIC
    name (default ``eth1``); ``delay``/``loss`` (per direction) need ``tc netem`` in the kernel.
    """

    nodes: int
    name: str = DEFAULT_NAME
    subnet: str = DEFAULT_SUBNET
    rate: str | None = None
    ifnames: Mapping[int, str] = field(default_factory=dict)
    delay: str | None = None
    loss: str | None = None
    private_network: bool = True  # False: eth0 only, no private NIC (see sim/noprivate.py)

    def __post_init__(self) -> None:
        validate_name(self.name)
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise ConfigError(
                "sim-bad-node-count",
                _("a sim cluster needs at least 1 node, not {nodes!r}", nodes=self.nodes),
                _("give the node count as a positive integer, e.g. `ddpkit sim up 2`"),
            )
        if self.nodes > MAX_NODES:
            raise ConfigError(
                "sim-bad-node-count",
                _("{nodes} nodes is more than the {limit} a sim cluster may have",
                  nodes=self.nodes, limit=MAX_NODES),
                _("use at most {limit} nodes", limit=MAX_NODES),
            )
        network = parse_subnet(self.subnet)
        if network.num_addresses - 3 < self.nodes:
            raise ConfigError(
                "sim-subnet-too-small",
                _("subnet {network} has room for {room} nodes, not {nodes}", network=str(network),
                  room=max(network.num_addresses - 3, 0), nodes=self.nodes),
                _("use a larger subnet, e.g. --subnet 10.0.0.0/24"),
            )
        object.__setattr__(self, "subnet", str(network))
        if self.rate is not None:
            object.__setattr__(self, "rate", format_rate(parse_rate(self.rate)))
        if self.delay is not None:
            object.__setattr__(self, "delay", format_delay(parse_delay(self.delay)))
        if self.loss is not None:
            object.__setattr__(self, "loss", format_loss(parse_loss(self.loss)))
        object.__setattr__(self, "ifnames", MappingProxyType(_checked_ifnames(self.ifnames, self.nodes)))
        if not self.private_network:
            from ddpkit.sim.noprivate import check_options

            check_options(self.rate, self.delay, self.loss, self.ifnames)

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def needs_netem(self) -> bool:
        return self.delay is not None or self.loss is not None

    def private_ifname(self, index: int) -> str:
        return self.ifnames.get(index, DEFAULT_PRIVATE_IFNAME)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "name": self.name,
            "subnet": self.subnet,
            "rate": self.rate,
            "ifnames": {str(index): name for index, name in sorted(self.ifnames.items())},
            "delay": self.delay,
            "loss": self.loss,
            "private_network": self.private_network,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimSpec:
        ifnames = {int(index): str(name) for index, name in dict(data.get("ifnames") or {}).items()}
        return cls(
            nodes=int(data["nodes"]),
            name=str(data["name"]),
            subnet=str(data["subnet"]),
            rate=data.get("rate"),
            ifnames=ifnames,
            delay=data.get("delay"),
            loss=data.get("loss"),
            private_network=bool(data.get("private_network", True)),
        )


def validate_name(name: str) -> str:
    """A cluster name: 1-6 lowercase letters/digits starting with a letter (it prefixes link names)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ConfigError(
            "sim-bad-name",
            _("{name!r} is not a valid sim cluster name", name=name),
            _("use 1-{limit} lowercase letters or digits starting with a letter, e.g. `ddpkit` or "
              "`lab2` (it prefixes interface names, which Linux limits to 15 characters)",
              limit=NAME_MAX),
        )
    return name


def parse_subnet(text: str) -> ipaddress.IPv4Network:
    """A private IPv4 network that does not overlap the nodes' public 172.17.0.0/16."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise ConfigError(
            "sim-bad-subnet",
            _("--subnet {text!r} is not an IPv4 network: {reason}", text=text, reason=str(exc)),
            _("give a network address with its prefix, e.g. --subnet 10.0.0.0/24"),
        ) from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise ConfigError("sim-bad-subnet", _("--subnet {text} is IPv6", text=text),
                          _("give an IPv4 network"))
    if (
        not network.is_private
        or network.is_loopback
        or network.is_link_local
        or network.prefixlen < 8
        or network.overlaps(_PUBLIC_NETWORK)
    ):
        raise ConfigError(
            "sim-bad-subnet",
            _("--subnet {network} must be a private network (prefix /8 or longer) outside "
              "{public}, loopback and link-local", network=str(network),
              public=str(_PUBLIC_NETWORK)),
            _("use e.g. --subnet 10.0.0.0/24 or 192.168.77.0/24"),
        )
    return network


def parse_rate(text: str) -> int:
    """``1gbit`` / ``100mbit`` / ``2.5gbit`` -> bits per second (SI units, as tc counts them)."""
    match = _RATE_RE.fullmatch(text.strip())
    if not match:
        raise ConfigError(
            "sim-bad-rate",
            _("--rate {text!r} is not a rate", text=text),
            _("give bits per second with a unit: bit, kbit, mbit, gbit or tbit, e.g. --rate 1gbit "
              "(tc's bps units are bytes, so ddpkit does not accept them)"),
        )
    bits = round(float(match.group(1)) * _RATE_UNITS[match.group(2).lower()])
    if not MIN_RATE_BITS <= bits <= MAX_RATE_BITS:
        raise ConfigError(
            "sim-bad-rate",
            _("--rate {text} is outside {low}..{high}", text=text, low=format_rate(MIN_RATE_BITS),
              high=format_rate(MAX_RATE_BITS)),
            _("pick a rate in that range, e.g. --rate 1gbit"),
        )
    return bits


def format_rate(bits: int) -> str:
    """The shortest exact tc spelling of a rate: 1000000000 -> ``1gbit``, 2500000000 -> ``2500mbit``."""
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if bits % _RATE_UNITS[unit] == 0:
            return f"{bits // _RATE_UNITS[unit]}{unit}"
    return f"{bits}bit"


def parse_delay(text: str) -> int:
    """``10ms`` / ``500us`` / ``0.2s`` -> microseconds."""
    match = _DELAY_RE.fullmatch(text.strip())
    if not match:
        raise ConfigError(
            "sim-bad-delay",
            _("--delay {text!r} is not a duration", text=text),
            _("give a delay with a unit: us, ms or s, e.g. --delay 5ms"),
        )
    micros = round(float(match.group(1)) * _DELAY_UNITS_US[match.group(2).lower()])
    if not 0 < micros <= MAX_DELAY_US:
        raise ConfigError(
            "sim-bad-delay", _("--delay {text} must be above 0 and at most 10s", text=text),
            _("e.g. {example}", example="--delay 5ms"),
        )
    return micros


def format_delay(micros: int) -> str:
    if micros % 1000:
        return f"{micros}us"
    return f"{micros // 1000}ms"


def parse_loss(text: str) -> float:
    """``0.5%`` -> 0.5 (percent of packets dropped per direction)."""
    match = _LOSS_RE.fullmatch(text.strip())
    if not match or not 0 < float(match.group(1)) <= 100:
        raise ConfigError(
            "sim-bad-loss",
            _("--loss {text!r} is not a percentage above 0 and at most 100", text=text),
            _("give it with a percent sign, e.g. --loss 0.1%"),
        )
    return float(match.group(1))


def format_loss(percent: float) -> str:
    return f"{percent:g}%"


def parse_ifname_style(values: Sequence[str]) -> dict[int, str]:
    """``--ifname-style`` values -> {node index: private NIC name}.

    Each value is a comma list of ``INDEX=NAME`` (``1=ens5`` or ``1=ens5,2=enp0s8``); the flag may be
    repeated. Nodes not named keep ``eth1``.
    """
    result: dict[int, str] = {}
    for value in values:
        for item in value.split(","):
            index_text, sep, name = item.strip().partition("=")
            if not sep or not index_text.strip().isdigit() or not name.strip():
                raise ConfigError(
                    "sim-bad-ifname-style",
                    _("--ifname-style {value!r}: {item!r} is not INDEX=NAME", value=value,
                      item=item.strip()),
                    _("name a node's private NIC as INDEX=NAME, e.g. --ifname-style 1=ens5 "
                      "(comma-separate several: 1=ens5,2=enp0s8)"),
                )
            index, name = int(index_text), name.strip()
            if result.get(index, name) != name:
                raise ConfigError(
                    "sim-bad-ifname-style",
                    _("--ifname-style names node {index}'s NIC twice ({first}, {second})",
                      index=index, first=result[index], second=name),
                    _("give each node one private NIC name"),
                )
            result[index] = name
    return result


def _checked_ifnames(ifnames: Mapping[int, str], nodes: int) -> dict[int, str]:
    checked: dict[int, str] = {}
    for index, name in sorted(ifnames.items()):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < nodes:
            raise ConfigError(
                "sim-bad-ifname-style",
                _("--ifname-style names node {index!r}, but the cluster has nodes 0..{last}",
                  index=index, last=nodes - 1),
                _("use node indexes that exist"),
            )
        if not isinstance(name, str) or not _IFNAME_RE.fullmatch(name) or name in _RESERVED_IFNAMES:
            raise ConfigError(
                "sim-bad-ifname-style",
                _("{name!r} cannot be node {index}'s private NIC name", name=name, index=index),
                _("use 1-15 letters, digits, '_', '.' or '-' starting with a letter, not lo or "
                  "eth0 (eth0 is every node's public NIC)"),
            )
        if name != DEFAULT_PRIVATE_IFNAME:
            checked[index] = name
    return checked
