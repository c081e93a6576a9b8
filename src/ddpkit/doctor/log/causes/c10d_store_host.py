"""No agent hosted the c10d rendezvous's store: the agents dialled its endpoint in vain.

torchrun's c10d rendezvous has no node rank 0: the agent on the machine that ``--rdzv-endpoint``
names hosts the store, and it knows itself by comparing the endpoint with its hostname and the
addresses that hostname resolves to (``_matches_machine_hostname`` in torch's
elastic/rendezvous/utils.py), unless ``--rdzv-conf is_host=`` says it outright. Every other agent
is the store's client. ``_create_tcp_store`` (c10d_rendezvous_backend.py) raises
``RendezvousConnectionError: The connection to the C10d store has failed`` only from a client's
attempt: this agent dialled the endpoint and nothing listened there. On a machine whose hostname
resolves to another interface's address (a container's eth0, or a hostname missing from
/etc/hosts) the endpoint's own agent takes itself for a client too, so no agent hosts the store
and every node's dial times out (pytorch/pytorch#79388 and #67547; a real run on two simulated
machines whose hostnames resolve to eth0, tests/fixtures/logs/torchrun-sim/c10dnohost). The
other readings are the endpoint's node not started within the store's read timeout, or given
another endpoint (DEFAULT_PORT 29400 where it names no port: a real run in the sim). A loopback
endpoint, a name that does not resolve or a port in use are other causes' findings.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made, others_first
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import GAI_ERRORS, AddressClass, Fact
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# the words of _create_tcp_store's RendezvousConnectionError (torch 1.9 and later)
STORE_FAILED = "The connection to the C10d store has failed"
# a name that did not resolve: getaddrinfo's texts, Python's socket.gaierror, the BSD resolver's
# EAI_NONAME text
_UNRESOLVED = (*(text for _, text in GAI_ERRORS.values()), "gaierror", "nodename nor servname")


class C10dStoreHost(Cause):
    kinds = frozenset({"rdzv-connection", "connect-error", "exception", "resolve-failed"})
    specificity = 10
    supersedes = GENERIC | {"peer-unreachable"}
    yields_to = others_first("rendezvous-config")

    def __init__(self) -> None:
        self.clients: dict[str, None] = {}  # origins whose agent raised the client's error
        self.dialled: dict[str, dict[str, None]] = {}  # origin -> endpoints it dialled in vain
        self.unresolved = False  # a name did not resolve: another cause's finding
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        text = event.text
        if event.kind == "resolve-failed" or any(words in text for words in _UNRESOLVED):
            self.unresolved = True
        if event.kind == "rdzv-connection" and STORE_FAILED in text:
            self.clients.setdefault(event.origin)
            self.bag.add(event)
        elif event.kind == "connect-error" and event.get("source") == "c10d":
            if any(f.address_class is AddressClass.LOOPBACK for f in facts):
                return  # (a loopback endpoint: the loopback cause's finding)
            endpoint = f"{event.get('addr')}:{event.get('port')}" if event.get("port") else \
                event.get("addr")
            self.dialled.setdefault(event.origin, {}).setdefault(endpoint or "?")
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        clients = [origin for origin in self.clients if origin in self.dialled]
        if not clients or self.unresolved:
            return None
        endpoints = [e for origin in clients for e in self.dialled[origin] if e != "?"]
        endpoint = endpoints[0] if endpoints else _("the --rdzv-endpoint")
        text = [_("torchrun's c10d rendezvous could not reach its store at {endpoint}: the "
                  "agent dialled it as the store's client, nothing listened there, and it gave "
                  "up (RendezvousConnectionError).", endpoint=endpoint)]
        if len(clients) > 1:
            text.append(_("Each of the {count} agents whose logs are here did the same: none of "
                          "them hosted the store.", count=len(clients)))
        text.append(_("The c10d rendezvous has no node rank 0: the agent on the machine that "
                      "--rdzv-endpoint names hosts the store, and it knows itself by comparing "
                      "the endpoint with its hostname and the addresses that hostname resolves "
                      "to. Where that machine's hostname resolves to another address (a "
                      "container's eth0, or a hostname missing from /etc/hosts), its agent takes "
                      "itself for a client too and no agent hosts the store. Otherwise the "
                      "endpoint's node was not started within the store's read timeout "
                      "(read_timeout, 60 seconds by default), or was given another endpoint (one "
                      "without a port means port 29400)."))
        fix = _("On the endpoint's node add --rdzv-conf is_host=1, and on every node "
                "--local-addr <that node's private IP> (a hostname that resolves to the wrong "
                "address would mislead the workers too); or use the static rendezvous, which "
                "names the master outright: --rdzv-backend static --master-addr <node 0's "
                "private IP> --master-port <port> --node-rank <r> (what ddpkit launch runs).")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
