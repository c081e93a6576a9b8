"""GPUDirect RDMA on one end of a connection only: the nodes are set up differently.

NCCL prints a line for each connection it sets up over the net transport, once on each end (src/
transport/net.cc: "Channel %02d : %d[%x] -> %d[%x] [send] via NET/%s/%d%s" on the sending rank's
node, "[receive]" on the receiving rank's), with "/GDRDMA" where that end's GPU reads or writes
the NIC's memory directly (GPUDirect RDMA). Each end decides for itself (src/graph/paths.cc,
ncclTopoCheckGdr): the NIC and GPU must support it, the peer-memory module (nvidia-peermem,
nv_peer_mem before it) must be loaded, the GPU and NIC close enough (NCCL_NET_GDR_LEVEL); a send
asks more than a receive (GPUDirect reads only on Ampere and later, or with NCCL_NET_GDR_READ).
So a connection whose send uses it and whose receive does not has a receiving node that lacks
what the sending node has (the facts' ``NET_CONNECTION``): the nodes differ.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_KEPT = 4096  # connections followed


class GdrOneSide(Noting):
    needs = frozenset({FactKind.NET_CONNECTION})
    specificity = 10
    supersedes = GENERIC

    def __init__(self) -> None:
        super().__init__()
        self.sides: dict[str, set[str]] = {}  # "<rank> -> <peer>" -> the sides seen ("send+gdr")
        self.events: dict[str, list[Event]] = {}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is not FactKind.NET_CONNECTION:
                continue
            if fact.value not in self.sides and len(self.sides) >= _KEPT:
                continue
            seen = self.sides.setdefault(fact.value, set())
            if fact.detail not in seen:
                seen.add(fact.detail)
                self.events.setdefault(fact.value, []).append(event)

    def finding(self, context: Context) -> Finding | None:
        one_sided = [pair for pair, seen in self.sides.items()
                     if "send+gdr" in seen and "receive" in seen and "receive+gdr" not in seen]
        if not one_sided:
            return None
        pair = one_sided[0]
        for event in self.events[pair]:
            self.note(event, [pair])
        receiver = pair.rsplit(" -> ", 1)[1]
        text = _("NCCL's connection {pair} uses GPUDirect RDMA where rank {sender} sends and not "
                 "where rank {receiver} receives: GPUDirect RDMA works on the sending rank's node "
                 "and not on the receiving rank's (the peer-memory module nvidia-peermem loaded "
                 "on one only, or the GPU and the NIC farther apart on one), so the nodes are "
                 "set up differently.", pair=pair, sender=pair.split(" -> ", 1)[0],
                 receiver=receiver)
        fix = _("On every node: lsmod | grep -E 'nvidia_peermem|nv_peer_mem' (modprobe "
                "nvidia-peermem where it is missing) and nvidia-smi topo -m (the GPU to NIC "
                "path), then compare; NCCL_DEBUG_SUBSYS=INIT,NET shows each node's choice "
                "(\"GPU Direct RDMA Enabled\" or \"Disabled\" for each HCA).")
        # (its lines are NCCL's INFO: an error only where the run failed)
        return made("node-mismatch", context.severity, text, fix, merge(self.bag.items))
