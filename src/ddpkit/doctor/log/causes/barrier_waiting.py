"""init_process_group's store-based barrier still waiting for ranks when the log stops:
rendezvous-timeout.

torch's ``_store_based_barrier`` (distributed_c10d.py, torch 1.x to 2.x) counts the ranks that
reached init_process_group in the store and waits until the count is the world size, logging
"Waiting in store based barrier to initialize process group for rank: R, key: K
(world_size=W, worker_count=C, timeout=T)" (``num_workers_joined`` from torch 1.13) every 10
seconds, and "Rank R: Completed store-based barrier for key:K with W nodes." once every rank is
in. A log whose last barrier line still counts fewer ranks than the world has, and no completion,
stopped while some ranks had not reached init_process_group: their node was not started, was
started with other settings (another world size, another master address or port), or failed
before. A count above the world size is a reused store (stale_store.py), not this.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made, others_first
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.extract import barrier_counted
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _, _n


class BarrierWaiting(Cause):
    needs = frozenset({FactKind.WORKER_COUNT})
    specificity = 10
    supersedes = GENERIC
    # (any other rule's error says what went wrong: the barrier's own timeout, a rank's failure)
    yields_to = others_first("rendezvous-timeout")

    def __init__(self) -> None:
        self.waiting: tuple[int, int] | None = None  # (ranks counted, world size), last line
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if any(f.kind is FactKind.WORKER_COUNT and f.detail == "completed" for f in facts):
            self.waiting = None  # (the barrier was passed: what waited before is no wait)
            self.bag = Bag()
            return
        counted = barrier_counted(facts)
        if counted is not None and "Waiting in store based barrier" in event.text:
            count, world = counted
            self.waiting = counted if count < world else None
            if self.waiting is not None:
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.waiting is None:
            return None
        count, world = self.waiting
        text = _n("init_process_group's store-based barrier had counted {count} of the "
                  "{world} ranks when the log stops: the other rank never reached "
                  "init_process_group (its node was not started, was started with other "
                  "settings, or failed before).",
                  "init_process_group's store-based barrier had counted {count} of the "
                  "{world} ranks when the log stops: the other {missing} ranks never reached "
                  "init_process_group (their node was not started, was started with other "
                  "settings, or failed before).", world - count, count=count, world=world,
                  missing=world - count)
        fix = _("Read the logs of the nodes whose ranks are missing; start every node with the "
                "same --nnodes, --nproc-per-node, master address and port, and check that each "
                "reaches the master's port: ddpkit doctor --hosts <the nodes>.")
        severity = context.severity
        return made("rendezvous-timeout", severity, text, fix, merge(self.bag.items))
