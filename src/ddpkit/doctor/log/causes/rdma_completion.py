"""An RDMA adapter's driver reporting a failed work completion: InfiniBand/RoCE failed.

rdma-core's mlx5 provider prints "mlx5: <host>: got completion with error:" and the completion
entry in hex when a work request completes with an error other than a flush (providers/mlx5/
cq.c), under NCCL's IB transport or any verbs user: the transfer between the adapters failed
(a link down, a RoCE GID index that does not route between the nodes, a peer that went away).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class RdmaCompletion(Noting):
    needs = frozenset({FactKind.RDMA_ERROR})
    specificity = 10
    supersedes = GENERIC

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        providers = [f.value for f in facts if f.kind is FactKind.RDMA_ERROR]
        if providers:
            self.note(event, providers)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("The RDMA adapter's driver ({providers}) reported a work completion with an "
                 "error: a transfer over InfiniBand/RoCE between the nodes failed.",
                 providers=self.listed)
        return made("ib-error", "error", text, None, merge(self.bag.items))
