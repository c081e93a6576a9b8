"""A store-based barrier that counts more workers than the world has: a reused store.

torch's ``_store_based_barrier`` (distributed_c10d.py) adds one to a counter key per rank and
waits until the count equals ``world_size``; its lines print both ("world_size=N,
worker_count=M" / "num_workers_joined=M"). A count above the world size cannot come from this
run: the key outlived an earlier one (a ``file://`` FileStore whose file was not deleted, or a
TCPStore still up), and the barrier waits until it times out.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.extract import barrier_counted
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class StaleStore(Cause):
    needs = frozenset({FactKind.WORKER_COUNT})
    specificity = 40
    supersedes = GENERIC | {"rendezvous-timeout", "rendezvous-config"}

    def __init__(self) -> None:
        self.worst: tuple[int, int] | None = None  # (workers counted, world size)
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        counted = barrier_counted(facts)
        if counted is None:
            return
        count, world = counted
        if count > world:
            if self.worst is None or count - world > self.worst[0] - self.worst[1]:
                self.worst = (count, world)
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.worst is None:
            return None
        count, world = self.worst
        text = _("The store-based barrier counted {count} workers in a world of {world}: the "
                 "counter was left in the store by an earlier run (a file:// FileStore whose file "
                 "was reused, or a store that stayed up), so the barrier can never complete.",
                 count=count, world=world)
        fix = _("Give each run a fresh store: delete the init_method file before the run, or put "
                "the job's id in its path (file:///tmp/<job-id>.store); with env:// or tcp://, "
                "use a port no earlier run's store still holds.")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
