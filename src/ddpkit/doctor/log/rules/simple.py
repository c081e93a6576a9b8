"""Findings that follow from one kind of line (shm, duplicate-gpu, ib-error, ...)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.end_lines import CGROUP_OOM_WORDS
from ddpkit.doctor.log.evidence import Bag, merge, origins_text
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import replaced, specific_then_general
from ddpkit.i18n import _
from ddpkit.wording import clauses, sentences

DEFAULT_PORTS = {"29500": _("torchrun's default master port"), "29400": _("the default c10d "
                 "rendezvous port")}


@dataclass
class Facts:
    """What lines of one kind said: evidence, distinct details and field values, who said it."""

    bag: Bag = field(default_factory=Bag)
    details: list[str] = field(default_factory=list)
    values: dict[str, set[str]] = field(default_factory=dict)
    ranks: set[int] = field(default_factory=set)
    origins: set[str] = field(default_factory=set)

    def add(self, event: Event) -> None:
        self.bag.add(event)
        detail = event.get("detail")
        if detail and detail not in self.details and len(self.details) < 4:
            self.details.append(detail)
        for key, value in event.data.items():
            bucket = self.values.setdefault(key, set())
            if len(bucket) < 16:
                bucket.add(value)
        if event.rank is not None and len(self.ranks) < 64:
            self.ranks.add(event.rank)
        if (event.host or event.node) and len(self.origins) < 64:
            self.origins.add(event.origin)

    def one(self, key: str) -> list[str]:
        return sorted(self.values.get(key, ()))

    def where(self) -> str:
        parts = []
        if self.ranks:
            parts.append(_("rank {ranks}", ranks=", ".join(map(str, sorted(self.ranks)))))
        if self.origins:
            parts.append(_("on {hosts}", hosts=origins_text(self.origins)))
        return _(" ({where})", where=clauses(parts)) if parts else ""


# Words of the out-of-memory lines (patterns.py) that name the host's memory, not the GPU's: the
# kernel's OOM killer, torch's CPU allocator, Slurm's and Kubernetes' memory cgroup
# (end_lines.CGROUP_OOM_WORDS), Ray's memory monitor ("ray.exceptions.OutOfMemoryError: Task
# was killed due to the node running low on memory.")
HOST_MEMORY_WORDS = ("Killed process", "DefaultCPUAllocator", *CGROUP_OOM_WORDS,
                     "running low on memory")


def simple_finding(finding_id: str, facts: Facts) -> Finding:
    """The finding for lines of one kind, with the specifics the lines gave."""
    e = entry(finding_id)
    details = "; ".join(d.rstrip(". ") for d in facts.details)
    fix = e.fix
    text: str
    if finding_id == "shm":
        text = _("Shared memory failed{where}: {details}.", where=facts.where(), details=details)
    elif finding_id == "duplicate-gpu":
        pairs = zip(facts.one("rank_a"), facts.one("rank_b"), strict=False)
        devices = ", ".join(facts.one("device"))
        named = [_("{a} and {b}", a=a, b=b) for a, b in pairs]  # not inside _(): Babel skips it
        text = (_("Ranks {pairs} are on the same CUDA device ({devices}){where}.",
                  pairs=clauses(named), devices=devices, where=facts.where()) if devices else
                _("Ranks {pairs} are on the same CUDA device{where}.", pairs=clauses(named),
                  where=facts.where()))
    elif finding_id == "p2p":
        text = _("GPU peer-to-peer failed{where}: {details}.", where=facts.where(),
                 details=details)
    elif finding_id == "out-of-memory":
        host_side = any(w in d for d in facts.details for w in HOST_MEMORY_WORDS) or any(
            d.startswith("MemoryError") for d in facts.details)
        text = (_("Out of host memory{where}: {details}.", where=facts.where(), details=details)
                if host_side else
                _("Out of GPU memory{where}: {details}.", where=facts.where(), details=details))
    elif finding_id == "ib-error":
        text = (_("The RDMA network (EFA, through the libfabric net plugin) failed{where}: "
                  "{details}.", where=facts.where(), details=details)
                if "NET/OFI" in details else
                _("TensorPipe's InfiniBand transport (torch.distributed.rpc's) failed{where}: "
                  "{details}. TensorPipe picks it wherever it finds an RDMA device; one it "
                  "cannot fully use (AWS EFA, a virtual function) refuses a verbs call: exclude "
                  "the transport (TensorPipeRpcBackendOptions(_transports=['uv'])) or fix the "
                  "RDMA stack.", where=facts.where(), details=details)
                if "tensorpipe/" in details else
                _("InfiniBand failed{where}: {details}.", where=facts.where(), details=details))
        memlock = any(w in details for w in ("Cannot allocate memory", "MEMLOCK", "memlock"))
        if memlock:
            text = sentences([text, _("Registering memory failed for lack of locked memory: the "
                                      "memlock limit (ulimit -l) is too low.")])
    elif finding_id == "port-in-use":
        ports = facts.one("port")
        if ports:
            text = _("Port {ports} is already in use{where}.", ports=", ".join(ports),
                     where=facts.where())
            notes = [_("{port} is {what}: two jobs on one master collide there.", port=p,
                       what=DEFAULT_PORTS[p]) for p in ports if p in DEFAULT_PORTS]
            text = sentences([text, *notes])
            fix = replaced(fix, "29500", ports[0]) if ports[0] != "29500" else fix
        else:
            text = _("The store's port is already in use{where}.", where=facts.where())
    elif finding_id == "rendezvous-timeout":
        joined, total = facts.one("joined"), facts.one("total")
        if joined and total:
            text = _("Only {joined} of {total} expected ranks/nodes joined before the timeout.",
                     joined=joined[0], total=total[0])
        else:
            text = _("The rendezvous timed out{where}: {details}.", where=facts.where(),
                     details=details)
    elif finding_id == "rendezvous-config":
        text = _("The rendezvous could not start: {details}.", details=details)
        if "RendezvousClosedError" in details:
            text = sentences([text, _("A closed rendezvous means the store still holds a "
                                      "finished (or failed) run with this --rdzv-id.")])
    else:
        text = details
    return Finding(e.id, e.severity, e.title,
                   specific_then_general(text.strip() if text == details else text,
                                         e.explanation), fix,
                   merge(facts.bag.items))
