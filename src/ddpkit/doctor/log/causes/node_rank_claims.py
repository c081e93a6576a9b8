"""Two nodes' launchers given the same node rank.

A launcher started on each machine states the node rank it was given (DeepSpeed's launcher:
"nnodes=2, num_local_procs=8, node_rank=0"; the facts' ``NODE_RANK_CLAIM``). Each node of a job
needs its own, from 0 to the node count minus one: two logs of one job stating the same node
rank are two nodes given one command unchanged (node 0's, copied), so their processes take the
same global ranks and the other node's ranks are never taken; the job waits until a timeout or a
peer's failure. A real run on two simulated machines (DeepSpeed's launcher without ssh, both
nodes given --node_rank 0) waited until node 0 was stopped, and node 1's worker then lost the
store, which read as a lost peer and a failed rank.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_FILES = 256  # logs followed at once


class NodeRankClaims(Cause):
    needs = frozenset({FactKind.NODE_RANK_CLAIM})
    specificity = 20
    supersedes = GENERIC | {"connection-lost", "rendezvous-timeout", "collective-timeout"}

    def __init__(self) -> None:
        self.claims: dict[str, tuple[str, str]] = {}  # file -> (node rank, node count)
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.NODE_RANK_CLAIM and (
                    event.file in self.claims or len(self.claims) < _FILES):
                self.claims[event.file] = (fact.value, fact.detail)
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        seen: dict[str, int] = {}
        for rank, count in self.claims.values():
            if count.isdigit() and int(count) > 1:
                seen[rank] = seen.get(rank, 0) + 1
        twice = sorted((r for r, n in seen.items() if n > 1), key=int)
        if not twice:
            return None
        count = next(c for r, c in self.claims.values() if r == twice[0])
        text = _("{logs} logs of this job were each given node rank {rank} of {count} nodes: two "
                 "nodes ran the same command (node 0's, copied unchanged), so their processes "
                 "took the same global ranks and the ranks of another node were never taken. "
                 "The job waits for them until a timeout or a peer's failure ends it.",
                 logs=seen[twice[0]], rank=twice[0], count=count)
        fix = _("Give each node its own node rank, from 0 (the master) to {last}, and every node "
                "the same node count, master address and port (DeepSpeed: --node_rank; torchrun: "
                "--node-rank); ddpkit launch checks the node ranks for you.",
                last=int(count) - 1)
        return made("rank-assignment", "error", text, fix, merge(self.bag.items))
