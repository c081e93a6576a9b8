"""A worker that cannot reach its Ray head: Ray's own words name a firewall.

Ray prints its own message when a worker (or ``ray.init``) cannot reach the head (the facts'
``UNREACHED``): "Unable to connect to GCS at <addr>. Check that (1) Ray GCS with matching
version started successfully at the specified address, and (2) there is no firewall setting
preventing access.", the GCS client's "Failed to connect to GCS at address <addr> within N
seconds.", before Ray 2 "Could not establish connection to redis <addr> (context.err = N)".
A Ray cluster needs many ports open between the nodes (GCS, raylet, object manager, workers),
so a firewall is the likely cause once the head's address is routable.

An errno alone is not read as a firewall: ``EHOSTUNREACH`` and ``ETIMEDOUT`` on a connect come
from a wrong address as often (the corpus' confirmed threads: a master hostname that resolved
elsewhere timed out, a "No route to host" was a wrong master address); the network rules' own
reading of those lines (peer-unreachable, or firewall for NCCL's timeouts) stands.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC, entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import AddressClass, Fact, FactKind
from ddpkit.doctor.log.rules.unexplained import warning_line
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_NOT_ROUTED = (AddressClass.LOOPBACK, AddressClass.UNSPECIFIED)
# Ray's warning level: its Python format "<time> WARNING file:N -- ...", its C++ one
# "[<time> W <pid> <tid>] file:N: ..."
_RAY_WARNING = re.compile(r"\sWARNING \S+:\d+ --|^\[[\d-]+ [\d:.,]+ W \d+ \d+\]")


class Firewall(Noting):
    needs = frozenset({FactKind.UNREACHED})
    specificity = 10
    supersedes = GENERIC
    yields_to = frozenset({"peer-unreachable", "wrong-interface", "container-network",
                           "interface-not-found", "rendezvous-config"})

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if any(f.address_class in _NOT_ROUTED for f in facts):
            return  # (a head on this machine's loopback: no network between)
        ray = [f.value for f in facts if f.kind is FactKind.UNREACHED]
        if ray:
            self.note(event, [address for address in ray if address])

    def at_warning_level(self, text: str) -> bool:
        return warning_line(text) or _RAY_WARNING.search(text) is not None

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        where = self.listed or _("its address")
        text = _("Ray could not connect to its head ({where}); Ray's own message names the two "
                 "causes: no head of the same Ray version at that address, or a firewall between "
                 "the nodes (a Ray cluster needs many ports open between them).", where=where)
        fix = _("Check the head first: ray status on it, and the same ray --version on every "
                "node.\n"
                "Test the port from this node: nc -vz <head-addr> <port> (a ping that works while "
                "the port fails is a firewall); on the head list the rules: sudo iptables -S, "
                "sudo firewall-cmd --list-all, sudo ufw status; in the cloud, the security "
                "group.\n{fix}", fix=entry("firewall").fix)
        severity = self.severity(context)
        return made("firewall", severity, text, fix, merge(self.bag.items))
