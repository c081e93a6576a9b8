"""A master dialled before it was up: its name did not resolve, then the connect was refused.

c10d looks the master's name up before each connect and retries both (socket.cpp): "The IPv4
network addresses of (master, 29500) cannot be retrieved (gai error: -2 - Name or service not
known)" and later "The client socket has failed to connect to [master]:29500 (errno: 111 -
Connection refused)" for the same name (the facts' ``GAI_ERROR``, ``DIALLED``, ``ERRNO``). A
refusal needs an address: the name resolved after all, and the machine answered with nothing
listening yet. So the name was not wrong; the worker dialled before the master (its DNS record,
as a Kubernetes pod's, or its store) was up.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import ERRNO_BY_NAME, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_REFUSED = str(ERRNO_BY_NAME["ECONNREFUSED"])


class ResolvedLater(Noting):
    needs = frozenset({FactKind.DIALLED})
    specificity = 10
    supersedes = GENERIC | {"rendezvous-config"}

    def __init__(self) -> None:
        super().__init__()
        self.unresolved: dict[tuple[str, str], int] = {}  # (file, host): the first such line
        self.lookups = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        looked_up = any(f.kind is FactKind.GAI_ERROR for f in facts)
        if not looked_up and not self.unresolved:
            return  # (a retry loop's connects, before any lookup failed: nothing to pair)
        hosts = [f.value for f in facts if f.kind is FactKind.DIALLED]
        if looked_up:
            for host in hosts:
                if len(self.unresolved) < 64:
                    self.unresolved.setdefault((event.file, host), event.line)
            self.lookups.add(event)
        elif any(f.kind is FactKind.ERRNO and f.value == _REFUSED for f in facts):
            self._refused(event, hosts)

    def _refused(self, event: Event, hosts: list[str]) -> None:
        """A refused connect to a name that failed to resolve earlier in the same file."""
        first = self.unresolved.get
        later = [h for h in hosts if first((event.file, h), event.line) < event.line]
        if later:
            self.note(event, later)

    def finding(self, context: Context) -> Finding | None:
        if not self.values:
            return None
        text = _("{hosts} did not resolve at first, then the connection to it was refused: the "
                 "name resolved later, so it was not wrong; the worker dialled the master before "
                 "it was up (its DNS record or its store not there yet).",
                 hosts=self.listed)
        fix = _("Start the workers once the master runs (or let them wait longer: a larger "
                "--rdzv-timeout, or retries around init_process_group); then check that the "
                "master listens on that port: ddpkit nics --to <master-addr>")
        return made("peer-unreachable", "error", text, fix,
                    merge(self.lookups.items, self.bag.items))
