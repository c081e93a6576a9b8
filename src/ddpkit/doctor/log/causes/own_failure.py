"""One rank failed on its own account, and the others' errors are what that did to them.

When a process of a job exits, its sockets close: every rank that was waiting on it in a
collective, or holds a connection to it, then fails in the transport's words ("Connection closed
by peer", "Connection reset by peer", "Broken pipe", NCCL's "remote process exited or there was a
network error", a watchdog's "timed out"; launch.outcomes.CONSEQUENCE_PATTERNS), and torchrun
stops the rest. Each rank's uncaught exception ends its output, after torch's excepthook tag
"[rank<N>]: " (distributed_c10d.py) where the run has one, so the logs of all ranks (torchrun
--log-dir, --tee, a pod's log per rank) hold one exception per rank. One rank whose exception is
of neither kind (a ValueError of the script's own checks, a KeyError, a CUDA error) beside ranks
whose exceptions are consequences is where the job failed: rank-failed, naming it, ahead of the
lost connections it caused. The distributed layer's own exceptions (NCCL's, Gloo's, c10d's, the
store's and the rendezvous's) and an interrupt are not a rank's own account; another rule's
specific error (memory that ran out, a CUDA error it names) says more.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import FEW, Cause, Context, made, others_first
from ddpkit.doctor.log.evidence import Bag
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.prefixes import raised
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _, _n
from ddpkit.launch.outcomes import CONSEQUENCE_PATTERNS
from ddpkit.launch.torchrun.tracebacks import INTERRUPTS

# an exception of the distributed layer itself, or an interrupt: never a rank's own account
_DISTRIBUTED = re.compile(r"NCCL|[Gg]loo|c10d|ProcessGroup|Dist\w*Error|Rendezvous|Store|"
                          + "|".join(sorted(INTERRUPTS)))
_RANKS_KEPT = 4096


def _consequence(text: str) -> str:
    """The words of ``text`` that make it a consequence, as printed ("" when none do)."""
    lowered = text.lower()
    for pattern in CONSEQUENCE_PATTERNS:
        at = lowered.find(pattern)
        if at >= 0:
            return text[at:at + len(pattern)]
    return ""


class OwnFailure(Cause):
    kinds = frozenset({"exception"})
    specificity = 10
    supersedes = GENERIC | {"connection-lost"}
    yields_to = others_first("rank-failed") - {"connection-lost"}

    def __init__(self) -> None:
        # each rank's first uncaught exception (a chained one's first is the original), and its line
        self.first: dict[int, tuple[str, Event]] = {}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        rank = event.rank
        if (rank is None or rank in self.first or len(self.first) >= _RANKS_KEPT
                or not raised(event.text, results=True)):
            return
        self.first[rank] = (event.exception_text(), event)

    def finding(self, context: Context) -> Finding | None:
        own = {r: v for r, v in self.first.items()
               if not _consequence(v[0]) and _DISTRIBUTED.search(v[0]) is None}
        after = {r: v for r, v in self.first.items() if _consequence(v[0])}
        if not own or not after:
            return None
        own_ranks, after_ranks = sorted(own), sorted(after)
        text = [_n("Rank {ranks} failed on its own account: {error}",
                   "Ranks {ranks} failed on their own account; the first: {error}",
                   len(own_ranks), ranks=", ".join(map(str, own_ranks[:FEW])),
                   error=own[own_ranks[0]][0].rstrip(".") + "."),
                _n("Rank {ranks} failed after it in the transport's words ({error}): a process "
                   "that exits closes its connections, so its peers' collectives fail.",
                   "Ranks {ranks} failed after it in the transport's words ({error}): a process "
                   "that exits closes its connections, so its peers' collectives fail.",
                   len(after_ranks), ranks=", ".join(map(str, after_ranks[:FEW])),
                   error=_consequence(after[after_ranks[0]][0]))]
        bag, consequences = Bag(), Bag(1)
        for rank in own_ranks:
            bag.add(own[rank][1])
        consequences.add(after[after_ranks[0]][1])
        fix = _("Fix what rank {rank} reports (its own output, above its exception, shows where "
                "it raised it); the other ranks' errors go away with it.", rank=own_ranks[0])
        # (its own failure first, then the consequence: not in file order)
        return made("rank-failed", "error", text, fix, (*bag.items, *consequences.items))
