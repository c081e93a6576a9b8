"""The rendezvous store refused its port: the system does not let this process bind it.

c10d's TCPStore server binds the master port on the node that hosts the store (torch's
socket.cpp: "The server socket has failed to bind to %s (errno: %d - %s)." and then "The server
socket has failed to listen on any local network address."; with libuv "... port: %d, useIpv6:
%d, code: %d, name: %s, message: %s"; on Windows "(system error: %d - %s)"). bind(2) fails with
EACCES (13, "Permission denied") when "the address is protected, and the user is not the
superuser" (the Linux manual, bind(2) and ip(7): a port below 1024, or below
net.ipv4.ip_unprivileged_port_start). Windows Sockets' WSAEACCES (10013, "An attempt was made to
access a socket in a way forbidden by its access permissions") on bind means another program
holds the port with exclusive access, or the port lies in a range the system reserved (Hyper-V
and WinNAT reserve ranges at boot: ``netsh interface ipv4 show excludedportrange protocol=tcp``).
Either way the port cannot be had, as if another process held it: the catalogue's port-in-use,
whose fix (another port, the same on every node) is this one's.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.causes.store_address import store_bind_failed
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import ERRNO_BY_NAME, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_FORBIDDEN = str(ERRNO_BY_NAME["EACCES"])


class StorePortForbidden(Noting):
    needs = frozenset({FactKind.ERRNO})
    specificity = 20
    supersedes = GENERIC | {"internal-error", "peer-unreachable"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if not store_bind_failed(event, facts, _FORBIDDEN):
            return
        self.note(event, [f.value for f in facts if f.kind is FactKind.PORT])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        where = (_("port {ports}", ports=self.listed) if self.values else _("its port"))
        text = _("The rendezvous store could not listen on {where}: the system refused the bind "
                 "as not permitted (EACCES; on Windows 10013). On Linux a port below 1024 needs "
                 "root; on Windows the port lies in a range the system reserves (Hyper-V, "
                 "WinNAT) or another program holds it exclusively.", where=where)
        fix = _("Pick a port of 1024 or above that no reserved range holds, and pass the same "
                "one on every node: --master-port 29501. On Windows, netsh interface ipv4 show "
                "excludedportrange protocol=tcp lists the reserved ranges.")
        severity = self.severity(context)
        return made("port-in-use", severity, text, fix, merge(self.bag.items))
