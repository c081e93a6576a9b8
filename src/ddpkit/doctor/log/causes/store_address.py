"""The rendezvous store told to listen on an address this machine does not have.

c10d's TCPStore server binds the master address and port on the node that hosts the store
(torch's socket.cpp: "The server socket has failed to bind to %s (errno: %d - %s)." and then
"The server socket has failed to listen on any local network address."; torch 2.2 on, with libuv:
DistNetworkError "... failed to listen on any local network address. port: %d, useIpv6: %d,
code: %d, name: %s, message: %s"). bind(2) fails with EADDRNOTAVAIL (99, "Cannot assign requested
address") when "a nonexistent interface was requested or the requested address was not local"
(the Linux manual, bind(2) and ip(7)): the master address names another machine, a hostname that
resolves to an address this one does not hold (an /etc/hosts line of an old lease), or, in a
container on a bridge network, the host's address, which the container does not have. The
rendezvous settings do not fit the node that hosts the store: rendezvous-config. Binding the "any"
address ([::] on a machine with IPv6 turned off) fails the same way and is harmless: c10d goes on
to the next address, so those lines are not read.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import ERRNO_BY_NAME, AddressClass, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_NOT_LOCAL = str(ERRNO_BY_NAME["EADDRNOTAVAIL"])
_SERVER = ("server socket", "TCPStore", "failed to listen")  # the store's own bind and listen


def store_bind_failed(event: Event, facts: tuple[Fact, ...], errno: str) -> bool:
    """Whether ``event`` is the store's own bind or listen failing with ``errno``."""
    return any(f.kind is FactKind.ERRNO and f.value == errno for f in facts) and any(
        words in event.text for words in _SERVER)


class StoreAddress(Noting):
    needs = frozenset({FactKind.ERRNO})
    specificity = 20
    supersedes = GENERIC | {"peer-unreachable", "internal-error"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if not store_bind_failed(event, facts, _NOT_LOCAL):
            return
        named = [f for f in facts if f.kind is FactKind.ADDRESS]
        addresses = [f.value for f in named if f.detail != AddressClass.UNSPECIFIED.value]
        if named and not addresses:
            return  # "any address" ([::] where IPv6 is off): c10d tries the next one
        self.note(event, addresses)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        if self.values:
            text = _("The rendezvous store could not listen on {addresses}: bind failed with "
                     "EADDRNOTAVAIL (errno 99, the address is not one of this machine's). The "
                     "master address names another machine, or a hostname that resolves to an "
                     "address this node does not have.", addresses=self.listed)
        else:
            text = _("The rendezvous store could not listen on the master address: bind failed "
                     "with EADDRNOTAVAIL (errno 99, the address is not one of this machine's). "
                     "The master address names another machine, or a hostname that resolves to "
                     "an address this node does not have.")
        fix = _("On the node that hosts the store (node rank 0), the master address must be one "
                "of its own addresses: ip -brief addr lists them, and ddpkit nics names the one "
                "the other nodes reach. Pass that same address as --master-addr on every node; "
                "in a container on a bridge network, run it with --network host.")
        severity = self.severity(context)
        return made("rendezvous-config", severity, text, fix, merge(self.bag.items))
