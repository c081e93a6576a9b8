"""Findings that follow from one kind of line (shm, duplicate-gpu, ib-error, ...)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.evidence import Bag, merge, origins_text
from ddpkit.doctor.log.scan import Event

DEFAULT_PORTS = {"29500": "torchrun's default master port", "29400": "the default c10d "
                 "rendezvous port"}


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
            parts.append("rank " + ", ".join(map(str, sorted(self.ranks))))
        if self.origins:
            parts.append("on " + origins_text(self.origins))
        return f" ({'; '.join(parts)})" if parts else ""


def simple_finding(finding_id: str, facts: Facts) -> Finding:
    """The finding for lines of one kind, with the specifics the lines gave."""
    e = entry(finding_id)
    details = "; ".join(d.rstrip(". ") for d in facts.details)
    fix = e.fix
    if finding_id == "shm":
        text = f"Shared memory failed{facts.where()}: {details}."
    elif finding_id == "duplicate-gpu":
        pairs = zip(facts.one("rank_a"), facts.one("rank_b"), strict=False)
        devices = ", ".join(facts.one("device"))
        text = ("Ranks " + "; ".join(f"{a} and {b}" for a, b in pairs)
                + f" are on the same CUDA device ({devices}){facts.where()}.")
    elif finding_id == "p2p":
        text = f"CUDA peer-to-peer failed{facts.where()}: {details}."
    elif finding_id == "out-of-memory":
        host_side = any(w in d for d in facts.details
                        for w in ("Killed process", "DefaultCPUAllocator")) or any(
            d.startswith("MemoryError") for d in facts.details)
        gpu_side = any(w in details.lower() for w in ("cuda", "gpu"))
        what = "GPU" if gpu_side and not host_side else "host" if host_side else "GPU"
        text = f"Out of {what} memory{facts.where()}: {details}."
    elif finding_id == "ib-error":
        text = f"InfiniBand failed{facts.where()}: {details}."
        memlock = any(w in details for w in ("Cannot allocate memory", "MEMLOCK", "memlock"))
        if memlock:
            text += (" Registering memory failed for lack of locked memory: the memlock limit "
                     "(ulimit -l) is too low.")
    elif finding_id == "port-in-use":
        ports = facts.one("port")
        if ports:
            text = f"Port {', '.join(ports)} is already in use{facts.where()}."
            notes = [f"{p} is {DEFAULT_PORTS[p]}: two jobs on one master collide there."
                     for p in ports if p in DEFAULT_PORTS]
            text += (" " + " ".join(notes)) if notes else ""
            fix = fix.replace("29500", ports[0]) if ports[0] != "29500" else fix
        else:
            text = f"The store's port is already in use{facts.where()}."
    elif finding_id == "rendezvous-timeout":
        joined, total = facts.one("joined"), facts.one("total")
        if joined and total:
            text = f"Only {joined[0]} of {total[0]} expected ranks/nodes joined before the timeout."
        else:
            text = f"The rendezvous timed out{facts.where()}: {details}."
    elif finding_id == "rendezvous-config":
        text = f"The rendezvous could not start: {details}."
        if "RendezvousClosedError" in details:
            text += (" A closed rendezvous means the store still holds a finished (or failed) run "
                     "with this --rdzv-id.")
    else:
        text = details
    return Finding(e.id, e.severity, e.title, text.strip() + " " + e.explanation, fix,
                   merge(facts.bag.items))
