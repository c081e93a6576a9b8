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
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made, others_first
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class NodeNeverJoined(Noting):
    needs = frozenset({FactKind.NODE_INFO_WAIT})
    specificity = 10
    supersedes = GENERIC
    yields_to = others_first("rendezvous-timeout")

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value for f in facts if f.kind is FactKind.NODE_INFO_WAIT])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        nodes = max(int(n) for n in self.values)
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
