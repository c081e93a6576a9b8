"""Two ranks' Gloo addresses of different families: one IPv4, the other IPv6.

Gloo's tcp transport (``gloo/transport/tcp/device.cc``, ``Device::isInitiator``, as vendored by
torch v2.4) compares its own address with the peer's before it connects:
``GLOO_ENFORCE_EQ(ss1.ss_family, ss2.ss_family)``, whose failure reads ``[enforce fail at
.../device.cc:N] ss1.ss_family == ss2.ss_family. 2 vs 10`` (Linux: 2 AF_INET, 10 AF_INET6). Each
rank picks its address from its own hostname or interface, so the nodes resolved to different
families (a hostname with an IPv6 address on one node, a master address of 0.0.0.0 or ::).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_FAMILIES = {"2": "IPv4 (AF_INET)", "10": "IPv6 (AF_INET6)"}


class AddressFamily(NotingValues):
    needs = frozenset({FactKind.FAMILY_MISMATCH})
    specificity = 20
    finding_id = "node-mismatch"
    supersedes = GENERIC | {"internal-error"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        pairs = [" / ".join(_FAMILIES.get(n, n) for n in (f.value, f.detail))
                 for f in facts if f.kind is FactKind.FAMILY_MISMATCH and f.value != f.detail]
        if pairs:
            self.note(event, pairs)

    def words(self) -> tuple[str, str]:
        text = _("Gloo found two ranks' addresses of different families ({families}): one node "
                 "chose an IPv4 address, another an IPv6 one, and Gloo's TCP transport cannot "
                 "connect them.", families=self.listed)
        fix = _("Give every node the same address family: an IPv4 --master-addr (not a hostname "
                "that resolves to IPv6, not 0.0.0.0), and GLOO_SOCKET_IFNAME=<the interface of "
                "that IPv4 network> on every node (ip -4 addr shows it)")
        return text, fix
