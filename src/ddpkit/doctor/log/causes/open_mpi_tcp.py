"""Open MPI's TCP transports, in their own words: an interface the peers cannot use.

Open MPI's TCP byte-transfer layer (btl tcp) and its runtime's out-of-band channel (oob tcp) use
every interface a node has unless ``btl_tcp_if_include``/``_exclude`` say otherwise, and each
process publishes all its addresses. Where a node has an address the others cannot reach (a
container bridge such as docker0's 172.17.0.1, libvirt's virbr0 192.168.122.1, the same address
on two machines), its peers dial it or take a connection from an address they do not know, and
say so in Open MPI's own messages (the facts' ``MPI_TCP``; opal/mca/btl/tcp/
help-mpi-btl-tcp.txt, btl_tcp_endpoint.c, v4.0 to v5.0): "Open MPI failed to TCP connect to a
peer MPI process" with its "connect() to <addr>:<port> failed", "received unexpected process
identifier", "accepted a TCP connection from what appears to be another Open MPI process but
cannot find a corresponding process entry", "detected an inbound MPI TCP connection request
from a peer ... from an IP address that is unexpected". Open MPI's documented remedy is to name
the interface the nodes share.

The runtime's daemons (orte/mca/oob/tcp/oob_tcp_connection.c, v4.x) print "A process or daemon
was unable to complete a TCP connection to another process", whose own text names a firewall on
the remote host first: that is the finding, with the interface as the other remedy.
"""

from __future__ import annotations

from ddpkit.doctor.addresses import describe_kind
from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, keep_few, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import clauses, sentences

_DAEMONS = "oob connect fail"  # the runtime's message; every other topic is the btl's


class OpenMpiTcp(Noting):
    needs = frozenset({FactKind.MPI_TCP})
    specificity = 10
    supersedes = GENERIC | {"peer-unreachable", "connection-lost"}

    def __init__(self) -> None:
        super().__init__()
        self.topics: dict[str, None] = {}
        self.addresses: dict[str, None] = {}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.MPI_TCP:
                self.topics.setdefault(fact.value)
        keep_few(self.addresses, [f.value for f in facts if f.kind is FactKind.ADDRESS])
        self.note(event, [])

    def finding(self, context: Context) -> Finding | None:
        if not self.topics:
            return None
        severity = context.severity
        fix = _("Name the interface the nodes share (`ddpkit nics` lists this node's; the one "
                "whose address the other nodes reach): mpirun --mca btl_tcp_if_include <iface> "
                "--mca oob_tcp_if_include <iface> (or OMPI_MCA_btl_tcp_if_include=<iface> in the "
                "environment; horovodrun --network-interface <iface>), or leave the bridges out: "
                "--mca btl_tcp_if_exclude lo,docker0,virbr0. NCCL needs the same interface: "
                "NCCL_SOCKET_IFNAME=<iface> (mpirun -x NCCL_SOCKET_IFNAME).")
        if set(self.topics) == {_DAEMONS}:
            text = _("Open MPI's daemons could not complete a TCP connection to another node; "
                     "Open MPI's own message names a firewall on the remote host first, or its "
                     "out-of-band channel tried an interface the other node cannot reach.")
            fix = _("Open the ports between the nodes (sudo iptables -S, sudo firewall-cmd "
                    "--list-all, sudo ufw status; in the cloud, the security group). If they are "
                    "open, Open MPI's out-of-band channel picked an interface the other node "
                    "cannot reach:\n{interface}", interface=fix)
            return made("firewall", severity, text, fix, merge(self.bag.items))
        where = clauses([_("{address}: {kind}", address=address, kind=describe_kind(address))
                         for address in self.addresses])
        paired = _("Open MPI's TCP transport failed to pair up with its peers ({topics}): Open "
                   "MPI uses every interface a node has unless told which, and an address the "
                   "other nodes cannot reach (a container or virtual-machine bridge such as "
                   "docker0 or virbr0, or the same address on two machines) breaks the job's "
                   "connections.", topics=clauses([_said(topic) for topic in self.topics]))
        said = [paired, _("Addresses in its messages: {where}.", where=where)] if where else [paired]
        return made("wrong-interface", severity, sentences(said), fix, merge(self.bag.items))


def _said(topic: str) -> str:
    """What Open MPI's message of ``topic`` (facts/program_checks.py MPI_TCP_TOPICS) says, in words."""
    if topic == "client connect fail":
        return _("a connect to a peer's address failed")
    if topic == "unexpected process identifier":
        return _("a peer answered as another process")
    if topic == "server accept cannot find guid":
        return _("a connection came from a process it does not know")
    return _("a connection came from an address it did not expect")
