"""A loopback address in a job that spans machines.

Peers on another machine can never reach 127.0.0.0/8, ``::1`` or ``localhost``: an address of
that class dialled or advertised in a multi-machine job is the cause, whatever printed it
(c10d's connect, Gloo's pair, NCCL's bootstrap on ``lo``, torchrun's ``master_addr=``). Debian
and Ubuntu map the machine's own hostname to 127.0.1.1 in /etc/hosts, so a hostname used as the
master address, or Gloo's and c10d's own hostname lookup, lands there.

One log shows the job spans machines even where no line counts the nodes: torchrun's static
rendezvous (``static_tcp_rendezvous.py``) makes the agent of node rank 0 the store's server,
which listens on every address, and every other agent its client. An agent of that rendezvous
whose store connection to a loopback address failed is therefore a client (node rank 1 or
more), dialling its own machine for a store that node 0 holds.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding, Severity
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.causes.container_bridge import NETWORK_KINDS
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import AddressClass, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# Lines of the distributed stack that name an address: NCCL's, Gloo's and c10d's network
# lines, torchrun's rendezvous result (master_addr), rendezvous and NCCL failures
_KINDS = NETWORK_KINDS | {"job-fact", "rdzv-connection", "rdzv-timeout", "gloo-mesh-failed",
                          "gloo-timeout", "nccl-warn", "exception", "failure-line"}
# torchrun's static rendezvous, whose frames in a traceback name the agent's store
_STATIC_RENDEZVOUS = "static_tcp_rendezvous"
# An exception or error line counts when it is the distributed stack's (a loopback address in
# another program's error, a metrics server on localhost, says nothing about the job's network)
_STACK_WORDS = ("DistNetworkError", "c10d", "Gloo", "gloo", "NCCL", "endezvous", "TCPStore",
                "client socket", "torch.distributed")


class Loopback(Cause):
    needs = frozenset({FactKind.ADDRESS, FactKind.INTERFACE, FactKind.FRAME})
    specificity = 30
    supersedes = GENERIC | {"peer-unreachable", "container-network", "firewall",
                            "connection-lost", "rendezvous-timeout"}

    def __init__(self) -> None:
        self.addresses: dict[str, None] = {}
        self.bag = Bag()
        self.static_agents: set[str] = set()  # origins whose traceback is the static rendezvous
        self.store_dialers: set[str] = set()  # origins whose c10d store dial to loopback failed

    kinds = _KINDS

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if any(f.kind is FactKind.FRAME and f.value.endswith(_STATIC_RENDEZVOUS) for f in facts):
            self.static_agents.add(event.origin)
        generic = event.kind in ("exception", "failure-line", "connection-lost") or (
            event.kind == "connect-error" and not event.get("source"))  # no known printer
        if generic and not any(word in event.text for word in _STACK_WORDS):
            return
        found = [f.value for f in facts if f.address_class is AddressClass.LOOPBACK]
        found += [f"lo:{f.detail}" for f in facts
                  if f.kind is FactKind.INTERFACE and (f.value == "lo" or f.value.startswith("lo:"))]
        if found:
            if event.kind == "connect-error" and event.get("source") == "c10d":
                self.store_dialers.add(event.origin)
            for value in found:
                if len(self.addresses) < 8:
                    self.addresses.setdefault(value)
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        clients = sorted(self.static_agents & self.store_dialers)
        if not self.addresses or not (context.multi_node or clients):
            return None
        shown = ", ".join(self.addresses)
        if context.multi_node:
            text = [_("The job spans machines, yet the logs show a loopback address "
                      "({addresses}): no other machine can reach it.", addresses=shown)]
        else:
            where = clients[0].removeprefix("file:")
            text = [_("The torchrun agent of {where} joined the static rendezvous as a client, "
                      "so its --node-rank is not 0 and node 0 holds the store, on another "
                      "machine; yet it dialled the store at a loopback address ({addresses}), "
                      "which reaches only its own machine. (If every node really runs on this "
                      "one machine, node 0's agent was not listening yet.)",
                      where=where, addresses=shown)]
        if any(a.startswith("127.0.1.") for a in self.addresses):
            text.append(_("127.0.1.1 is what Debian and Ubuntu map the machine's own hostname to "
                          "in /etc/hosts: a hostname used as the master address, or a library "
                          "looking up its own hostname, lands there."))
        fix = _("Give every node the master's private IP, not a hostname or localhost:\n"
                "  --master-addr <master-ip> (or --rdzv-endpoint <master-ip>:<port>); find it on "
                "the master with: ddpkit nics\n"
                "Or fix /etc/hosts so the hostname maps to that IP, not to 127.0.1.1.\n"
                "Name the routable interface, never lo: export NCCL_SOCKET_IFNAME=<iface> "
                "GLOO_SOCKET_IFNAME=<iface>")
        # an error when the failure is the network's; beside another failure, a warning
        severity: Severity = "error" if context.network_failed else "warning"
        return made("wrong-interface", severity, text, fix, merge(self.bag.items))
