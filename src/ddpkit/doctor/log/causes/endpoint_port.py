"""A rendezvous endpoint given without a port.

torchrun's c10d and etcd backends read ``--rdzv-endpoint HOST[:PORT]`` with a default port
(29400 for c10d, 2379 for etcd: ``parse_rendezvous_endpoint``), not MASTER_PORT: an endpoint
without one makes the nodes dial a port the store may not listen on. torchrun prints the
endpoint it uses in its launch configs ("rdzv_endpoint : HOST") and its "Rendezvous info".
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.extract import endpoint_port
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class EndpointWithoutPort(Cause):
    needs = frozenset({FactKind.RDZV_ENDPOINT})
    specificity = 20
    supersedes = GENERIC | {"peer-unreachable", "firewall", "rendezvous-timeout"}

    def __init__(self) -> None:
        self.endpoints: dict[str, None] = {}
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if (fact.kind is FactKind.RDZV_ENDPOINT and fact.value not in ("", "None", '""')
                    and endpoint_port(fact.value) is None and len(self.endpoints) < 4):
                self.endpoints.setdefault(fact.value)
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.endpoints or not context.failed:
            return None
        shown = ", ".join(self.endpoints)
        text = _("The rendezvous endpoint {endpoint} names no port: torchrun's c10d backend then "
                 "uses its default port 29400 (etcd: 2379), not MASTER_PORT, so the nodes may "
                 "dial a port no store listens on.", endpoint=shown)
        fix = _("Give the endpoint its port on every node, the same everywhere:\n"
                "  --rdzv-endpoint <master-ip>:29400 (or the port your store listens on)")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
