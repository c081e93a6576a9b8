"""Pure choice of the interface for inter-node traffic: traps, ranking, and the env lines to use.

Ranking without a route (documented in docs/nics.md): only *usable* interfaces compete: up, not
loopback, with a routable address (IPv4, or a global IPv6). Among them, lower is better, compared in
this order:

1. how many warning traps the interface has (docker default subnet, no IPv4, shared address,
   container bridge);
2. whether it lacks a private IPv4 address outside 172.17.0.0/16;
3. its kind: physical/InfiniBand, then veth, bridge, tunnel/other virtual, container bridge;
4. whether it lacks any IPv4 address;
5. link speed, faster first (unknown counts as slowest);
6. its name.

With a route (``nics --to HOST``) the routed interface wins whatever its rank, and its traps are
reported as warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import ConfigError
from ddpkit.i18n import _
from ddpkit.net.interfaces import (
    DOCKER_DEFAULT_SUBNET,
    Address,
    Nic,
    NicKind,
    same_ip,
)
from ddpkit.net.route import Route
from ddpkit.wording import commas

# Traps that make an interface unusable for inter-node traffic; the others only count against it.
BLOCKING_TRAPS = frozenset({"loopback", "interface-down", "no-address", "link-local-only"})

KIND_TIER = {
    NicKind.PHYSICAL: 0,
    NicKind.INFINIBAND: 0,
    NicKind.VETH: 1,
    NicKind.BRIDGE: 2,
    NicKind.TUNNEL: 3,
    NicKind.VIRTUAL: 3,
    NicKind.CONTAINER_BRIDGE: 4,
    NicKind.LOOPBACK: 5,
}


@dataclass(frozen=True)
class Trap:
    """A reason an interface is a bad or risky choice for inter-node traffic."""

    id: str
    message: str

    @property
    def blocking(self) -> bool:
        return self.id in BLOCKING_TRAPS

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "message": self.message, "blocking": self.blocking}


@dataclass(frozen=True)
class Recommendation:
    """The interface to name in NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME, and why."""

    nic: Nic
    address: str
    reason: str
    traps: tuple[Trap, ...]

    @property
    def env(self) -> dict[str, str]:
        return socket_env(self.nic.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "interface": self.nic.name,
            "address": self.address,
            "kind": self.nic.kind.value,
            "reason": self.reason,
            "traps": [t.to_dict() for t in self.traps],
        }


def traps(nic: Nic, nics: Sequence[Nic]) -> tuple[Trap, ...]:
    """Every trap of ``nic``; ``nics`` (all interfaces of the machine) finds shared addresses."""
    found: list[Trap] = []
    name = nic.name

    def add(trap_id: str, message: str) -> None:
        found.append(Trap(trap_id, message))

    if nic.kind is NicKind.LOOPBACK:
        add("loopback", _("{name} is the loopback interface: no other machine can reach it",
                          name=name))
    if not nic.up:
        if "UP" in nic.flags and nic.operstate:
            add("interface-down", _("{name} is up but its link is {state} (no carrier: cable, peer "
                                    "or bridge port?): it carries no traffic", name=name,
                                    state=nic.operstate))
        else:
            add("interface-down", _("{name} is administratively down (`ip link set {name} up`): "
                                    "it carries no traffic", name=name))
    if not nic.addresses:
        add("no-address", _("{name} has no IP address", name=name))
    elif nic.kind is not NicKind.LOOPBACK and not nic.routable:
        shown = ", ".join(a.with_prefix for a in nic.addresses)
        add(
            "link-local-only",
            _("{name} has only link-local addresses ({shown}): peers on other networks cannot"
              " use them and NCCL skips them", name=name, shown=shown),
        )
    elif nic.kind is not NicKind.LOOPBACK and not any(a.is_routable for a in nic.ipv4):
        add(
            "no-ipv4",
            _("{name} has no routable IPv4 address: peers must use IPv6"
              " (NCCL_SOCKET_FAMILY=AF_INET6)", name=name),
        )
    docker = next((a for a in nic.ipv4 if a.in_docker_default_subnet), None)
    if docker is not None:
        add(
            "docker-default-subnet",
            _("{name} holds {address}, inside Docker's default {subnet}: such an address is "
              "often the same on every instance and unreachable from peers", name=name,
              address=docker.with_prefix, subnet=DOCKER_DEFAULT_SUBNET),
        )
    if nic.kind is NicKind.CONTAINER_BRIDGE:
        add(
            "container-bridge",
            _("{name} is a container/VM bridge: only containers on this host are behind it",
              name=name),
        )
    for address in nic.routable:
        others = sorted(
            other.name
            for other in nics
            if other.name != name
            and other.kind is not nic.kind
            and any(same_ip(address.address, a.address) for a in other.addresses)
        )
        if others:
            add(
                "shared-address",
                _("{address} on {name} is also on {others} (another kind of interface): which one "
                  "traffic uses depends on routing", address=address.address, name=name,
                  others=", ".join(others)),
            )
            break
    return tuple(found)


def is_usable(nic: Nic, nics: Sequence[Nic]) -> bool:
    return not any(t.blocking for t in traps(nic, nics))


def ranking(nics: Sequence[Nic]) -> tuple[Nic, ...]:
    """The usable interfaces, best first (the order the module docstring documents)."""
    usable = [n for n in nics if is_usable(n, nics)]
    return tuple(sorted(usable, key=lambda n: _rank_key(n, nics)))


def _rank_key(nic: Nic, nics: Sequence[Nic]) -> tuple[int, int, int, int, int, str]:
    warnings = [t for t in traps(nic, nics) if not t.blocking]
    return (
        len(warnings),
        0 if _preferred_ipv4(nic) is not None else 1,
        KIND_TIER[nic.kind],
        0 if any(a.is_routable for a in nic.ipv4) else 1,
        -(nic.speed_mbps or 0),
        nic.name,
    )


def _preferred_ipv4(nic: Nic) -> Address | None:
    return next(
        (a for a in nic.ipv4 if a.is_private and not a.in_docker_default_subnet and a.is_routable),
        None,
    )


def best_address(nic: Nic) -> Address | None:
    """The address peers should use: private non-docker IPv4, else any routable IPv4, else IPv6."""
    preferred = _preferred_ipv4(nic)
    if preferred is not None:
        return preferred
    routable_v4 = [a for a in nic.ipv4 if a.is_routable]
    routable_v6 = [a for a in nic.ipv6 if a.is_routable]
    return next(iter(routable_v4 + routable_v6 + list(nic.addresses)), None)


def recommend(nics: Sequence[Nic], route: Route | None = None) -> Recommendation:
    """The interface for inter-node traffic: the routed one if ``route`` is given, else the best
    ranked. Raises ConfigError ``no-usable-interface`` (or ``interface-not-found`` for a route
    through an interface not in ``nics``)."""
    if route is not None:
        return _recommend_route(nics, route)
    ranked = ranking(nics)
    if not ranked:
        checked = ", ".join(f"{n.name} ({_trap_ids(n, nics) or 'unusable'})" for n in nics)
        raise ConfigError(
            "no-usable-interface",
            _("no interface here is up with a routable address (checked: {checked})",
              checked=checked or _("none")),
            _("bring the private-network interface up and give it an address (see `ip addr`), or"
              " give the interface yourself with NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME"),
            details={"interfaces": [n.name for n in nics]},
        )
    best = ranked[0]
    address = best_address(best)
    assert address is not None  # usable implies a routable address
    found = traps(best, nics)
    family = address.family.replace("ip", "IP")
    held = (_("private {family} {address}", family=family, address=address.with_prefix)
            if address.is_private else f"{family} {address.with_prefix}")
    trap_text = (_("no traps") if not found
                 else _("traps: {ids}", ids=", ".join(t.id for t in found)))
    reason: str = _("{name} is up, {kind}; {address}; {traps}", name=best.name,
                    kind=best.kind.word(), address=held, traps=trap_text)
    others = ranked[1:]
    if others:
        shown = commas([_("{name} ({what})", name=n.name, what=_trap_ids(n, nics) or n.kind.word())
                        for n in others])
        reason = _("{reason}; ranked above {shown}", reason=reason, shown=shown)
    unusable = [n for n in nics if n not in ranked and n.kind is not NicKind.LOOPBACK]
    if unusable and not others:
        reason = _("{reason}; the only usable interface", reason=reason)
    return Recommendation(best, address.address, reason, found)


def _recommend_route(nics: Sequence[Nic], route: Route) -> Recommendation:
    nic = find_interface(route.ifname, nics)
    found = traps(nic, nics)
    target = route.host if route.host == route.address else f"{route.host} ({route.address})"
    reason: str
    if route.local:
        reason = _("{target} is this machine's own address, held by {name}", target=target,
                   name=nic.name)
    elif route.gateway:
        reason = _("the routing table reaches {target} through {name} via gateway {gateway} "
                   "from source {source}", target=target, name=nic.name, gateway=route.gateway,
                   source=route.source)
    else:
        reason = _("the routing table reaches {target} through {name} from source {source}",
                   target=target, name=nic.name, source=route.source)
    if found:
        reason = _("{reason}; warning, {name} is a trap ({ids})", reason=reason, name=nic.name,
                   ids=", ".join(t.id for t in found))
        ranked = [n for n in ranking(nics) if n.name != nic.name]
        if ranked:
            reason = _("{reason}; without a route the ranking would pick {name}", reason=reason,
                       name=ranked[0].name)
    return Recommendation(nic, route.source, reason, found)


def _trap_ids(nic: Nic, nics: Sequence[Nic]) -> str:
    return ", ".join(t.id for t in traps(nic, nics))


def find_interface(name: str, nics: Sequence[Nic]) -> Nic:
    """The interface called ``name``; ConfigError ``interface-not-found`` naming what exists."""
    for nic in nics:
        if nic.name == name:
            return nic
    known = sorted(n.name for n in nics)
    raise ConfigError(
        "interface-not-found",
        _("no interface named {name!r} on this machine", name=name),
        _("interfaces here: {known} (see `ddpkit nics`)", known=", ".join(known) or _("none")),
        details={"interface": name, "available": known},
    )


def socket_env(ifname: str) -> dict[str, str]:
    """The variables that pin NCCL and Gloo to ``ifname``.

    NCCL takes a list of name *prefixes* unless the value starts with ``=`` (exact names): plain
    ``eth1`` would also match ``eth10``. Gloo takes exact names as they are.
    """
    if not ifname or len(ifname) > 15 or any(c.isspace() or c in ",/=^:" for c in ifname):
        raise ConfigError(
            "bad-interface-name",
            _("{name!r} is not an interface name", name=ifname),
            _("use a name `ddpkit nics` lists (at most 15 characters, no spaces, commas or '/')"),
        )
    return {"NCCL_SOCKET_IFNAME": f"={ifname}", "GLOO_SOCKET_IFNAME": ifname}


def env_lines(env: dict[str, str]) -> list[str]:
    """``KEY=value`` lines, as nccl.conf and ``env`` take them (NCCL_SOCKET_IFNAME==eth1)."""
    return [f"{key}={value}" for key, value in env.items()]


def export_lines(env: dict[str, str]) -> list[str]:
    """Shell ``export KEY=value`` lines, each value quoted for POSIX shells where it needs it."""
    import shlex

    return [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
