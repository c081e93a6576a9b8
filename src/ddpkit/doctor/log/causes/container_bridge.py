"""Docker's default bridge on every node.

The 172.17.0.0/16 network is the container side of Docker's NAT on every machine that runs
Docker: each node's container gets an address in it (often the same one), which no other
machine can reach. When every address the nodes state for themselves or dial is in it, the
containers run on the bridge, not on the host's network.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding, Severity
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import AddressClass, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# What NCCL, Gloo and c10d print about the addresses a job uses (its own, or a peer's it dials)
NETWORK_KINDS = frozenset({"nccl-bootstrap", "nccl-socket-ifaces", "nccl-socket-item", "nccl-oob",
                           "connect-error", "connection-lost"})
_IGNORED = (AddressClass.LOOPBACK, AddressClass.UNSPECIFIED)


class ContainerBridge(Cause):
    kinds = NETWORK_KINDS
    needs = frozenset({FactKind.ADDRESS})
    specificity = 20
    supersedes = GENERIC | {"peer-unreachable", "firewall", "connection-lost"}
    yields_to = frozenset({"wrong-interface"})

    def __init__(self) -> None:
        self.bridge: dict[str, set[str]] = {}  # origin -> its bridge addresses
        self.other = False  # an address of another (reachable) class was seen
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            kind = fact.address_class
            if kind is AddressClass.CONTAINER_BRIDGE:
                if len(self.bridge) < 64:
                    self.bridge.setdefault(event.origin, set()).add(fact.value)
                self.bag.add(event)
            elif kind is not None and kind not in _IGNORED:
                self.other = True

    def finding(self, context: Context) -> Finding | None:
        if self.other or not self.bridge:
            return None
        if len(self.bridge) < 2 and not context.multi_node:
            return None
        addresses = sorted({a for found in self.bridge.values() for a in found})
        text = _("Every address the nodes use is on Docker's default bridge (172.17.0.0/16: "
                 "{addresses}): each container sits behind its own machine's NAT, where the "
                 "other machines cannot reach it.", addresses=", ".join(addresses[:6]))
        # an error when the failure is the network's; beside another failure, a warning
        severity: Severity = "error" if context.network_failed else "warning"
        return made("container-network", severity, text, None, merge(self.bag.items))
