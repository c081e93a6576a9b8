"""A node rank no agent took: torchrun's agents waited for every node's worker info.

After the rendezvous, each torchrun agent sets its workers' role info in the store under its own
node rank ("torchelastic/role_info/<node rank>") and waits for every node's (torch's elastic
agent, api.py ``_assign_worker_ranks``, a ``multi_get``); the wait that times out lists every key
it asked for (the facts' ``NODE_INFO_WAIT``). A key that never comes is a node rank no agent of
this store holds: two nodes were given the same ``--node-rank`` (node 0's command copied to node
1 unchanged: both agents are node 0, and each waits for a node 1), or that node was not started,
or started against another master address or port. A real run of two torchrun agents, both
``--node-rank 0``, on two simulated machines printed it on both
(tests/fixtures/logs/torchrun-sim/dupnode). The agent raised it, not a rank: no worker started.

Node rank 0's agent, once it holds every node's info, hands each node rank its workers' ranks
("torchelastic/assigned_ranks/<node rank>"), which every other agent waits for (the facts'
``ASSIGNED_RANKS_WAIT``). That wait timing out on a node's own log is the same missing node rank
seen from the other side: node 0's agent never had them all. Node ranks run from 0 to --nnodes
minus one, so a rank at or past that count is never waited for (a sim run, node 1 given
``--node-rank 2`` of two nodes, waited so; node 0 waited for node rank 1).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, keep_few, made, others_first
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class NodeNeverJoined(Noting):
    needs = frozenset({FactKind.NODE_INFO_WAIT, FactKind.ASSIGNED_RANKS_WAIT})
    specificity = 10
    supersedes = GENERIC
    yields_to = others_first("rendezvous-timeout")

    def __init__(self) -> None:
        super().__init__()
        self.own_ranks: dict[str, None] = {}  # the node ranks that waited for their ranks

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value for f in facts if f.kind is FactKind.NODE_INFO_WAIT])
        waited = [f.value for f in facts if f.kind is FactKind.ASSIGNED_RANKS_WAIT]
        if waited:
            keep_few(self.own_ranks, waited)
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        if not self.values:
            return self._unassigned()
        nodes = max(int(n) for n in self.values)
        outside = [r for r in self.own_ranks if int(r) >= nodes]
        if outside:  # (both sides read: an agent took a node rank the count leaves out)
            text = _("torchrun's agent of node rank {rank} waited for its workers' ranks while "
                     "node rank 0's agent waited for the worker info of node ranks 0 to {last} "
                     "({nodes} nodes): node rank {rank} is outside the node count node 0 was "
                     "given, so one of 0 to {last} was never taken. No worker started.",
                     rank=outside[0], last=nodes - 1, nodes=nodes)
            fix = _("Give each node its own --node-rank, from 0 (the master) to {last}, and every "
                    "node the same --nnodes; ddpkit launch checks the node ranks for you.",
                    last=nodes - 1)
            return made("rendezvous-timeout", "error", text, fix, merge(self.bag.items))
        text = _("torchrun's agents completed the rendezvous and then waited in the store for "
                 "the worker info of all {nodes} node ranks (0 to {last}), and one never came: "
                 "no agent of this store holds that node rank. Two nodes were given the same "
                 "--node-rank (node 0's command run unchanged on another node), or a node was "
                 "not started, or was started with another --master-addr or --master-port. No "
                 "worker started.", nodes=nodes, last=nodes - 1)
        fix = _("Give each node its own --node-rank, from 0 (the master) to {last}, and every "
                "node the same --nnodes, --master-addr and --master-port; start every node. "
                "ddpkit launch checks the node ranks for you.", last=nodes - 1)
        return made("rendezvous-timeout", "error", text, fix, merge(self.bag.items))

    def _unassigned(self) -> Finding:
        rank = max(int(r) for r in self.own_ranks)
        text = _("torchrun's agent of node rank {rank} completed the rendezvous and then waited "
                 "in the store for node rank 0's agent to hand out its workers' ranks, which "
                 "never came: node 0's agent was still waiting for the worker info of a node "
                 "rank no agent took. Node ranks run from 0 to --nnodes minus one, so "
                 "--node-rank {rank} needs --nnodes {count} or more on every node; or two nodes "
                 "were given the same --node-rank, or a node was not started. No worker started.",
                 rank=rank, count=rank + 1)
        fix = _("Give each node its own --node-rank, from 0 (the master) to --nnodes minus one, "
                "and every node the same --nnodes; node 0's own log names the node rank it "
                "waited for. ddpkit launch checks the node ranks for you.")
        return made("rendezvous-timeout", "error", text, fix, merge(self.bag.items))
