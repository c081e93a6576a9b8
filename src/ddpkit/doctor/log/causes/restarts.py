"""torchelastic re-forming its rendezvous again and again.

The elastic agent (agent/server/api.py) restarts its worker group when a worker failed ("Worker
group FAILED. N/M attempts left; will restart worker group") or when nodes came or went
("Detected N new nodes ...; will restart worker group"); each restart is a new rendezvous round
("attempts to join the next round of the rendezvous", "restart_count=N"). Two restarts or more
are a loop: the job never settles, whatever each round printed.
"""

from __future__ import annotations

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

LOOP = 2  # restarts that make a loop


class RendezvousRestarts(Cause):
    needs = frozenset({FactKind.RESTART})
    specificity = 0
    supersedes = frozenset({"no-result", "no-failure", "stopped-while-waiting"})

    def __init__(self) -> None:
        self.rounds = 0
        self.highest = 0
        self.workers_failed = False
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.RESTART:
                if fact.detail == "count":
                    self.highest = max(self.highest, int(fact.value))
                else:
                    self.rounds += event.repeat
                self.workers_failed = self.workers_failed or "FAILED" in event.text
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        count = max(self.highest, self.rounds)
        if count < LOOP:
            return None
        if self.workers_failed:
            text = _("torchelastic restarted the worker group {count} times: a worker keeps "
                     "failing, and each restart fails the same way.", count=count)
            return made("rank-failed", "error", text, None, merge(self.bag.items))
        text = _("torchelastic re-formed its rendezvous {count} times: nodes keep joining or "
                 "leaving (a node crashing and coming back, or two jobs sharing one rdzv id).",
                 count=count)
        fix = _("Give each job its own --rdzv-id, the same on every node, and the same "
                "--nnodes everywhere; read the first failure in each node's log.")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
