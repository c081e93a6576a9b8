"""A rank that never published its address while a Gloo process group connected.

init_process_group (and new_group) with Gloo connects every pair of ranks through the store: each
rank sets its address under its own rank's number and waits for every other rank's (the facts'
``UNJOINED_RANK``, from the key the wait timed out on). A rank whose key never came was never
there: no process of that rank reached init_process_group. Either the job started fewer
processes than its world size (a world_size or WORLD_SIZE larger than the processes torchrun or
the scheduler started, a node never started), or that rank's process failed or hung before
init. Where that rank's own failure is in the logs, it is the cause (own_failure.py): this
finding then ranks below it.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made, others_first
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _, _n


class RankNeverJoined(Noting):
    needs = frozenset({FactKind.UNJOINED_RANK})
    # below a rank's own failure (rank-failed, 40 + 10): where the missing rank's process raised
    # before init, that is what to fix; above the generic readings of the waiting ranks' end
    specificity = -20
    supersedes = GENERIC | {"connection-lost", "collective-timeout"}
    yields_to = others_first("rendezvous-timeout") - {"connection-lost", "collective-timeout"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value for f in facts if f.kind is FactKind.UNJOINED_RANK])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        ranks = sorted(self.values, key=int)
        text = _n("The processes waited in init_process_group for rank {ranks} to publish its "
                  "address in the store (Gloo connects every pair of ranks that way), and it "
                  "never did: no process of rank {ranks} reached init_process_group. The job "
                  "started fewer processes than its world size, or that rank's process failed "
                  "or hung before it.",
                  "The processes waited in init_process_group for ranks {ranks} to publish their "
                  "addresses in the store (Gloo connects every pair of ranks that way), and they "
                  "never did: no process of those ranks reached init_process_group. The job "
                  "started fewer processes than its world size, or those ranks' processes failed "
                  "or hung before it.", len(ranks), ranks=", ".join(ranks))
        fix = _("Make the world size match the processes started: let the launcher set RANK and "
                "WORLD_SIZE (torchrun --nnodes and --nproc-per-node, or ddpkit launch) and call "
                "init_process_group() without world_size= and rank=; start every node; if rank "
                "{rank}'s process did start, read its own output for what stopped it before "
                "init_process_group.", rank=ranks[0])
        return made("rendezvous-timeout", "error", text, fix, merge(self.bag.items))
