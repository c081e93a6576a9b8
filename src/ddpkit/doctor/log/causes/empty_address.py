"""NCCL connecting to an empty address: it found no interface to take an address from.

NCCL's socket code (misc/socket.cc, ncclSocketInit/ncclSocketConnect) prints "connecting to
address %s with family %d is neither AF_INET(%d) nor AF_INET6(%d)": with nothing for the
address and family 0, the address it was handed was never filled in, which is what
NCCL_SOCKET_IFNAME naming no interface of the machine leaves (or an interface without an
address of the family asked for). It fires when the logs also show such a setting.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class EmptyAddress(Cause):
    needs = frozenset({FactKind.EMPTY_ADDRESS, FactKind.IFNAME_SETTING})
    specificity = 30
    supersedes = GENERIC | {"internal-error", "peer-unreachable", "connection-lost"}

    def __init__(self) -> None:
        self.families: set[str] = set()
        self.settings: dict[tuple[str, str], None] = {}
        self.bag = Bag()
        self.setting_bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.EMPTY_ADDRESS and len(self.families) < 4:
                self.families.add(fact.value)
                self.bag.add(event)
            elif fact.kind is FactKind.IFNAME_SETTING and fact.value and len(self.settings) < 8:
                self.settings.setdefault((fact.detail, fact.value))
                self.setting_bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.families or not self.settings:
            return None
        text = [_("NCCL tried to connect to an empty address (family {family}): it found no "
                  "interface to take an address from.", family=", ".join(sorted(self.families)))]
        for variable, value in self.settings:
            text.append(_("{variable}={value} is set: it most likely names no interface of this "
                          "machine.", variable=variable, value=value))
        fix = _("List the machine's interfaces (ip -br addr, or ddpkit nics) and set "
                "NCCL_SOCKET_IFNAME to one that exists on every node (a prefix such as eth "
                "matches eth0, eth1; =eth0 matches only eth0), or unset it.")
        return made("interface-not-found", "error", text, fix,
                    merge(self.bag.items, self.setting_bag.items))
