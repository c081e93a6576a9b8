"""Pure: does any interface of this machine reach other machines at all? (``no-private-network``)

Rented GPU containers whose provider no longer offers a private network for multi-node have one
interface, eth0: a veth with an address in Docker's default subnet (172.17.0.4 on every
instance), NATed to the internet and reaching no other instance. A multi-node job there can only
time out. This module says so at once, from this machine's interfaces alone:

An interface *may reach a peer* unless it is loopback, down or without a routable address (the
blocking traps of :mod:`ddpkit.net.select`), a container bridge (docker0, cni0: only containers of
this host are behind it), or a virtual interface (veth, bridge, macvlan...) whose every routable
address is an IPv4 address in Docker's default subnet (a container's NAT side). A physical or
InfiniBand NIC and a tunnel (WireGuard, Tailscale), up and addressed, always may: a VPC can use
172.17.0.0/16 for real, and an overlay network is the way out. A physical NIC or a veth that is
down or has no address is a private network to repair, not the absence of one: the usual checks
(``no-route``, ``no-usable-interface``) name it, so it clears this one too. When no interface may,
:func:`isolation` returns what was tried, and :func:`no_private_network_error` is the
one-sentence error with the choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import NetworkProblem
from ddpkit.i18n import Text, _
from ddpkit.net.interfaces import Nic, NicKind
from ddpkit.net.select import best_address, ranking, traps

NO_PRIVATE_NETWORK = "no-private-network"
# interfaces that are never the way to another machine when their address is a container's NAT
_NAT_KINDS = frozenset({NicKind.VETH, NicKind.BRIDGE, NicKind.VIRTUAL})
_NEVER_NAT = frozenset({NicKind.PHYSICAL, NicKind.INFINIBAND, NicKind.TUNNEL})
# NICs that, down or without an address, are a private network to fix rather than none at all
# (the tunl0/sit0/ifb of a container are not: they are there unused)
_DEVICE_KINDS = frozenset({NicKind.PHYSICAL, NicKind.INFINIBAND, NicKind.VETH})


@dataclass(frozen=True)
class Tried:
    """An interface that cannot reach another machine, and why."""

    ifname: str
    address: str | None  # its first address, if any
    why: Text

    def to_dict(self) -> dict[str, Any]:
        return {"interface": self.ifname, "address": self.address, "why": str(self.why)}


@dataclass(frozen=True)
class Isolation:
    """No interface of this machine reaches a peer: every non-loopback one, and why not."""

    tried: tuple[Tried, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"tried": [t.to_dict() for t in self.tried]}


def unreachable_why(nic: Nic, nics: Sequence[Nic]) -> Text | None:
    """Why ``nic`` cannot carry traffic to another machine, or None when it may."""
    found = {t.id for t in traps(nic, nics)}
    if nic.kind is NicKind.LOOPBACK or "loopback" in found:
        return _("the loopback interface")
    if "interface-down" in found:
        return _("down")
    if "no-address" in found:
        return _("no IP address")
    if "link-local-only" in found:
        return _("only link-local addresses")
    if nic.kind is NicKind.CONTAINER_BRIDGE:
        return _("a container bridge: only containers on this machine are behind it")
    if nic.kind in _NEVER_NAT or nic.kind not in _NAT_KINDS:
        return None
    routable = nic.routable
    if routable and all(a.in_docker_default_subnet for a in routable):
        return _("a NAT address in Docker's default subnet 172.17.0.0/16, the same on every "
                 "instance")
    return None


def _has_nat_address(nic: Nic) -> bool:
    return any(a.in_docker_default_subnet for a in nic.ipv4)


def isolation(nics: Sequence[Nic]) -> Isolation | None:
    """What was tried when no interface of ``nics`` may reach a peer; None when one may."""
    tried: list[Tried] = []
    for nic in nics:
        why = unreachable_why(nic, nics)
        if why is None or (nic.kind in _DEVICE_KINDS and not _has_nat_address(nic)):
            return None  # a way out, or a NIC that may be one once fixed: the usual checks name it
        if nic.kind is not NicKind.LOOPBACK:
            first = nic.routable[0].address if nic.routable else (
                nic.addresses[0].address if nic.addresses else None)
            tried.append(Tried(nic.name, first, why))
    return Isolation(tuple(tried))


def tried_text(found: Isolation) -> Text:
    """``eth0 172.17.0.4 (why)``, the interfaces one after another (each part translated)."""
    parts = [
        _("{ifname} {address}, {why}", ifname=t.ifname, address=t.address, why=t.why)
        if t.address else _("{ifname}, {why}", ifname=t.ifname, why=t.why)
        for t in found.tried
    ]
    if not parts:
        return _("no interface but loopback")
    text = parts[0]
    for part in parts[1:]:
        text = _("{first}; {then}", first=text, then=part)
    return text


def no_private_network_error(found: Isolation, tun_device: bool) -> NetworkProblem:
    """The one sentence: what was tried, that there is no network between the instances, and the
    choices: one instance with more GPUs (always open), an overlay network whose interface ddpkit
    then picks; WireGuard, Tailscale and ZeroTier each need a TUN device, so ``tun_device`` (does
    /dev/net/tun exist on this node?) says whether that choice is open here."""
    names = [t.ifname for t in found.tried]
    if tun_device:
        message = _("no interface of this node reaches another instance (tried {tried}), so the "
                    "instances have no network between them. The safe choice is more GPUs in one "
                    "instance, as the provider's guide recommends. /dev/net/tun exists on this "
                    "node, so an overlay network such as WireGuard or Tailscale (or ZeroTier), "
                    "which needs that TUN device, can run here if every instance has it too; "
                    "ddpkit then picks its interface like any other", tried=tried_text(found))
    else:
        message = _("no interface of this node reaches another instance (tried {tried}), so the "
                    "instances have no network between them. The safe choice is more GPUs in one "
                    "instance, as the provider's guide recommends: /dev/net/tun does not exist on "
                    "this node, and an overlay network such as WireGuard or Tailscale (or "
                    "ZeroTier) needs that TUN device, so none can run in this container unless the "
                    "provider adds it", tried=tried_text(found))
    return NetworkProblem(
        "no-private-network", message,
        _("one instance: `ddpkit launch --nproc-per-node GPUS train.py` (no --nnodes); an "
          "overlay: bring it up on every instance, then `ddpkit nics` shows its interface"),
        details={"interfaces": names, "tun_device": tun_device, **found.to_dict()},
    )


def check_reachable(nics: Sequence[Nic], tun_device: bool) -> None:
    """Raise ``no-private-network`` when no interface of ``nics`` may reach a peer
    (``tun_device``: :func:`ddpkit.net.facts.tun_device_exists`)."""
    found = isolation(nics)
    if found is not None:
        raise no_private_network_error(found, tun_device)


def peer_addresses(nics: Sequence[Nic], *, limit: int = 3) -> tuple[tuple[str, str], ...]:
    """(interface, address) of this machine that other machines may reach, best ranked first:
    what to suggest for ``--master-addr`` instead of an address that cannot work."""
    found: list[tuple[str, str]] = []
    for nic in ranking(nics):
        address = best_address(nic)
        if address is not None and unreachable_why(nic, nics) is None:
            found.append((nic.name, address.address))
    return tuple(found[:limit])
