"""Gloo found no address for this machine's own hostname (not for an interface).

Gloo makes its device from the interface GLOO_SOCKET_IFNAME names, else from the machine's
hostname (torch's ProcessGroupGloo, GlooDeviceFactory; Gloo's tcp and uv transports, device.cc:
``lookupAddrForIface`` or ``lookupAddrForHostname``, the hostname looked up with getaddrinfo and
each address tried with bind). Both fail with the same words, "Unable to find address for: %s"
(the facts' ``GLOO_LOOKUP``). A name no interface can have is the hostname: one with a domain
("MacBook-Pro.local", "node1.cluster"), or, as Windows names PCs ("DESKTOP-4F2K9QX"), capitals or
more than 15 characters (Linux's IFNAMSIZ). Then the hostname resolves to no address this machine
can bind: an /etc/hosts line or a DNS record of an address it does not have, or none at all. The
catalogue's interface-not-found keeps its fix (naming an interface bypasses the hostname), with
the right reason.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC, entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_IFNAMSIZ = 15  # the longest Linux interface name (IFNAMSIZ - 1)
_DOMAIN = re.compile(r"\.[A-Za-z][\w-]*$")  # "host.local"; a VLAN's "eth0.100" is an interface


def hostname_shaped(name: str) -> bool:
    """Whether ``name`` is a hostname no interface could be named."""
    return bool(_DOMAIN.search(name)) or len(name) > _IFNAMSIZ or (
        any(c.isupper() for c in name) and "-" in name)


class GlooHostname(Noting):
    needs = frozenset({FactKind.GLOO_LOOKUP})
    specificity = 15
    supersedes = GENERIC | {"interface-not-found"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        names = [f.value for f in facts if f.kind is FactKind.GLOO_LOOKUP
                 and hostname_shaped(f.value.lstrip("^="))]
        if names:
            self.note(event, names)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("Gloo found no address for {names}, a hostname, not an interface: with "
                 "GLOO_SOCKET_IFNAME unset, Gloo looks up this machine's hostname, and it resolves "
                 "to no address this machine can bind (an /etc/hosts line or a DNS record of an "
                 "address it does not have, or none).", names=self.listed)
        fix = _("{fix}\nor map the hostname to one of this machine's own addresses in /etc/hosts "
                "(Windows: C:\\Windows\\System32\\drivers\\etc\\hosts)",
                fix=entry("interface-not-found").fix)
        e = entry("interface-not-found")  # (its general words are of an interface: left out)
        return Finding(e.id, "error", e.title, text, fix, merge(self.bag.items))
