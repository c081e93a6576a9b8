"""A node with no route to the address it dialled.

EHOSTUNREACH (113, "No route to host") and ENETUNREACH (101, "Network is unreachable") from a
connect mean this machine has no way to the address (its routing table has none, or the
address's network answered that the host cannot be reached): unlike a refusal, no process on the
other side was asked. When c10d's store client, Gloo or NCCL dials the master or a peer so, the
address the job was given or a peer advertised is on a network this node does not share, most
often the master's first interface (a management, container or public network) instead of the
private network the nodes share. A firewall rejecting with icmp-host-prohibited gives the same
errno, which the fix says.

c10d names what it dialled in its summary ("... failed to connect to any network address of (%s,
%d)"); its per-attempt lines print each resolved address, and torch 2.13 printed an IPv4 one as
a garbled address (a sim run dialling 10.0.0.2 printed "[::]:2354" and "73.86.0.0:3675"), so
where a summary names the target the attempts are not quoted.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, keep_few, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import ERRNOS, Fact, FactKind
from ddpkit.doctor.log.facts.network import names_c10d_target
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_NO_ROUTE = frozenset({"101", "113"})
# the words of a line in which Gloo or NCCL dialled a peer (each names its target as it dialled)
_PEER_DIAL = ("Gloo", "gloo", "NCCL", "socketPollConnect", "socketStartConnect", "> failed : ")

_STACK_WORDS = ("client socket", "DistNetworkError", "c10d", "TCPStore", "Gloo", "gloo",
                "NCCL", "socketPollConnect", "socketStartConnect", "endezvous",
                "> failed : ")  # (NCCL's "Connect to <address><<port>> failed : <strerror>")


class NoRoute(Cause):
    needs = frozenset({FactKind.DIALLED, FactKind.ERRNO})
    specificity = 5
    supersedes = GENERIC | {"peer-unreachable", "rendezvous-timeout"}

    def __init__(self) -> None:
        self.targets: dict[str, None] = {}  # as the dialling program named them
        self.attempts: dict[str, None] = {}  # c10d's resolved addresses, each attempt's
        self.errnos: dict[str, None] = {}
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        errnos = [f.value for f in facts if f.kind is FactKind.ERRNO and f.value in _NO_ROUTE]
        dialled = [f"{f.value}:{f.detail}" if f.detail else f.value for f in facts
                   if f.kind is FactKind.DIALLED]
        if not errnos or not dialled or not any(w in event.text for w in _STACK_WORDS):
            return
        named = names_c10d_target(event.text) or any(w in event.text for w in _PEER_DIAL)
        keep_few(self.targets if named else self.attempts, dialled)
        for number in errnos:
            self.errnos.setdefault(f"{number}, {ERRNOS[int(number)][1]}")
        self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        targets = ", ".join(self.targets or self.attempts)
        if not targets:
            return None
        # (a retry's warning alone may be a master still coming up: the failure makes it one)
        severity = context.severity
        text = _("This node has no route to {targets} (errno {errnos}): the address the job "
                 "was given for the master, or that a peer advertised, is on a network this "
                 "node does not reach, most often the master's first interface (a management, "
                 "container or public network) instead of the private network the nodes share.",
                 targets=targets, errnos="; ".join(self.errnos))
        fix = _("On this node, `ip route get <address>` shows the missing route. Give every node "
                "the master's address on the network they share (`ddpkit nics` on the master "
                "names it): --master-addr (MASTER_ADDR; accelerate's main_process_ip, "
                "DeepSpeed's --master_addr), and NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME set to "
                "that network's interface. If the route exists, a firewall on the master "
                "rejects the connection (icmp-host-prohibited): open the job's ports.")
        return made("wrong-interface", severity, text, fix, merge(self.bag.items))
