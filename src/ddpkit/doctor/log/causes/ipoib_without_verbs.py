"""A node with InfiniBand whose NCCL cannot use it: NCCL sends over TCP on the IPoIB interface,
ib-error (a warning: the run works, slowly).

NCCL's IB transport loads libibverbs (misc/ibvwrap.cc: "Failed to open libibverbs.so[.1]" where
it cannot) and then lists the HCAs ("NET/IB : No device found." where verbs see none); either
way it falls back to its socket transport ("NET/Socket : Using [0]<if>:<addr>", "Using network
Socket"). Linux names an IP-over-InfiniBand interface ib<N> (the ib_ipoib driver), or ibp<bus>s<slot>
and ibs<slot> under systemd's predictable names: a node whose NCCL binds one has InfiniBand
hardware, so the fallback is not a machine without InfiniBand (where those lines are normal) but
an image without the verbs library (rdma-core) or a container started without the IB devices
(/dev/infiniband). TCP over IPoIB reaches a fraction of RDMA's bandwidth.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

IPOIB = re.compile(r"ib\d+|ibp\d+s\d+\w*|ibs\d+\w*")  # (the interface name whole)


class IpoibWithoutVerbs(Cause):
    needs = frozenset({FactKind.IB_UNAVAILABLE, FactKind.INTERFACE})
    specificity = 5
    supersedes = GENERIC

    def __init__(self) -> None:
        self.unavailable: dict[str, str] = {}  # host (or file) -> why NCCL found no IB
        self.ipoib: dict[str, str] = {}  # host (or file) -> the IPoIB interface NCCL uses
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        where = event.host or event.file
        for fact in facts:
            if fact.kind is FactKind.IB_UNAVAILABLE and where not in self.unavailable:
                self.unavailable[where] = fact.value
                self.bag.add(event)
            elif (fact.kind is FactKind.INTERFACE and IPOIB.fullmatch(fact.value)
                  and where not in self.ipoib and event.kind in ("nccl-socket-ifaces",
                                                                  "nccl-bootstrap")):
                self.ipoib[where] = fact.value
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        hosts = [h for h in self.unavailable if h in self.ipoib]
        if not hosts:
            return None
        host = hosts[0]
        why = (_("could not load libibverbs") if self.unavailable[host] == "no-verbs"
               else _("found no InfiniBand device"))
        text = _("On {host}, NCCL {why}, yet it uses {iface}, an IP-over-InfiniBand interface: "
                 "the machine has InfiniBand, and NCCL sends over TCP on it, a fraction of "
                 "RDMA's bandwidth.", host=host, why=why, iface=self.ipoib[host])
        fix = _("Install the verbs library in the image (rdma-core: apt-get install libibverbs1 "
                "ibverbs-providers) and give the container the InfiniBand devices (docker run "
                "--device=/dev/infiniband, or the RDMA device plugin on Kubernetes); NCCL's "
                "INFO lines then say 'Using network IB'.")
        return made("ib-error", "warning", text, fix, merge(self.bag.items))
