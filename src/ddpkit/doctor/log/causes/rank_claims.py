"""Processes that took the same global rank while other ranks were never taken.

A launcher derives each process's global rank from the node rank and the local rank; two nodes
started with the same node rank (or a scheduler that ran the job as one node on each machine:
Slurm without --nodes, a Trainer's num_nodes that the allocation does not match) make two
processes take the same global rank, and the ranks of the missing node are never taken. The
processes that announce the rank they took (PyTorch Lightning's ``initializing ddp:
GLOBAL_RANK: r, MEMBER: r+1/world``) show it: some rank announced twice, fewer distinct ranks
than the world. A restart announces every rank again, so a log with a restart is not read so.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import ranges

_MOST = 4096  # ranks counted (a world larger than this is not read)


class RankClaims(Cause):
    needs = frozenset({FactKind.RANK_CLAIM, FactKind.RESTART})
    specificity = 10
    supersedes = GENERIC

    def __init__(self) -> None:
        self.claims: dict[int, int] = {}  # global rank -> times announced
        self.world = 0
        self.restarted = False
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.RESTART:
                self.restarted = True
            elif fact.kind is FactKind.RANK_CLAIM:
                rank, world = int(fact.value), int(fact.detail)
                if rank < world <= _MOST:
                    self.world = max(self.world, world)
                    self.claims[rank] = self.claims.get(rank, 0) + event.repeat
                    if self.claims[rank] > 1:
                        self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        twice = sorted(rank for rank, count in self.claims.items() if count > 1)
        missing = sorted(set(range(self.world)) - set(self.claims))
        if self.restarted or not twice or not missing:
            return None
        text = _("Global ranks {twice} were each taken by more than one process, and ranks "
                 "{missing} by none (world size {world}): two nodes took the same node rank, or "
                 "the launcher or scheduler ran the job as fewer nodes than the script expects.",
                 twice=ranges(twice), missing=ranges(missing), world=self.world)
        fix = _("Give every node its own node rank (--node-rank 0 to N-1, or let ddpkit assign "
                "them); under Slurm, allocate the nodes the script expects (#SBATCH --nodes=N "
                "and --ntasks-per-node equal to the GPUs per node, matching the Trainer's "
                "num_nodes and devices)")
        severity = context.severity
        return made("rank-assignment", severity, text, fix, merge(self.bag.items))
