"""A connection dialled to port 0: the port the program was given was never set, or set to 0.

Port 0 is no port a process can listen on for others: bind(2) with port 0 asks the kernel for
any free port (ip(7), "ephemeral port"), and connect(2) to port 0 reaches nothing. A rank that
dials a store, a master or a peer at port 0 (c10d's "No socket on (localhost, 0) is listening
yet, will retry.", its "failed to connect to [host]:0") was handed a port of 0: MASTER_PORT or
--master-port 0, or a launcher's or a platform's rendezvous settings that left the port 0 where
the store it meant listens on a port of its own (a merged fix of a Kubernetes launcher whose
injected rendezvous settings broke torchrun this way). It retries until its timeout and never
connects: rendezvous-config.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class PortZero(Cause):
    kinds = frozenset({EventKind.CONNECT_ERROR})
    specificity = 40  # (the port alone settles it, wherever the process dialled)
    supersedes = GENERIC | {"peer-unreachable", "firewall", "rendezvous-timeout", "wrong-interface"}

    def __init__(self) -> None:
        self.target = ""  # the host dialled at port 0, as printed
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if event.get("port") == "0":
            self.target = self.target or event.get("addr")
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("A process dialled {host} at port 0, and retries: port 0 is no port anyone "
                 "listens on (bound, it asks the kernel for any free port), so the connection "
                 "can never be made. The port it was handed was never set or was set to 0: "
                 "MASTER_PORT or --master-port 0, or rendezvous settings a launcher or platform "
                 "injected that leave the port 0.", host=self.target or "?")
        fix = _("Give the master's real port on every node (--master-port 29500, or "
                "MASTER_PORT=29500, the same everywhere) and remove any rendezvous setting that "
                "sets it to 0; ddpkit launch picks and passes a free port for you.")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
