"""A store-based barrier that counts more workers than the world has: a reused store.

torch's ``_store_based_barrier`` (distributed_c10d.py) adds one to a counter key per rank and
waits until the count equals ``world_size``; its lines print both ("world_size=N,
worker_count=M" / "num_workers_joined=M"). A count above the world size cannot come from this
run: the key outlived an earlier one (a ``file://`` FileStore whose file was not deleted, or a
TCPStore still up), and the barrier waits until it times out.

Without the barrier (torch 2.x skips it unless TORCH_DIST_INIT_BARRIER=1) the same file misleads
Gloo: its full mesh reads each rank's address from the store, and a key an earlier run wrote
(a killed run never deletes its file) sends a rank to a port no rank of this run listens on. On
one machine that is a refused connect to this machine's own address right after a ``file://``
init_method (the facts' ``FILE_STORE``): a real run killed with SIGKILL and started again on the
same file printed it (tests/fixtures/logs/torchrun-cpu/filestore).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.extract import barrier_counted
from ddpkit.doctor.log.facts.kinds import AddressClass, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class StaleStore(Cause):
    needs = frozenset({FactKind.WORKER_COUNT, FactKind.FILE_STORE, FactKind.ADDRESS})
    specificity = 40
    supersedes = GENERIC | {"rendezvous-timeout", "rendezvous-config", "wrong-interface"}

    def __init__(self) -> None:
        self.worst: tuple[int, int] | None = None  # (workers counted, world size)
        self.bag = Bag()
        self.file_store = ""  # a file:// init_method's URL ("file://" where the path was built)
        # the first loopback address Gloo was refused at (its port is printed byte-swapped)
        self.refused_at = ""
        self.mesh = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.FILE_STORE and not self.file_store:
                self.file_store = fact.value
                self.mesh.add(event)
        if (event.kind == "connect-error" and event.get("source") == "gloo"
                and "refused" in event.get("err").lower()
                and any(f.address_class is AddressClass.LOOPBACK for f in facts)):
            self.refused_at = self.refused_at or event.get("addr")
            self.mesh.add(event)
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
            return self._stale_addresses(context)
        count, world = self.worst
        text = _("The store-based barrier counted {count} workers in a world of {world}: the "
                 "counter was left in the store by an earlier run (a file:// FileStore whose file "
                 "was reused, or a store that stayed up), so the barrier can never complete.",
                 count=count, world=world)
        return made("rendezvous-config", "error", text, _fresh_store(), merge(self.bag.items))

    def _stale_addresses(self, context: Context) -> Finding | None:
        if not (self.file_store and self.refused_at) or context.multi_node:
            return None
        text = _("The ranks met through a FileStore ({url}), and Gloo then dialled {address} on "
                 "this machine and was refused: no rank of this run listened there. A file:// "
                 "store keeps what earlier runs wrote until its file is deleted, and a run that "
                 "was killed never deletes it, so this run read an earlier run's addresses.",
                 url=self.file_store, address=self.refused_at)
        return made("rendezvous-config", "error", text, _fresh_store(), merge(self.mesh.items))


def _fresh_store() -> str:
    return _("Give each run a fresh store: delete the init_method file before the run, or put "
             "the job's id in its path (file:///tmp/<job-id>.store); with env:// or tcp://, use "
             "a port no earlier run's store still holds.")
