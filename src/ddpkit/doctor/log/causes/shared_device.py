"""Two processes on one machine on one GPU, as NCCL's own line prefixes show it, in a run whose
NCCL call was refused as invalid usage.

With NCCL_DEBUG set, NCCL starts each line with ``host:pid:tid [dev]`` (src/debug.cc: the
hostname, the process and thread ids, and the CUDA device the thread had current). Two
processes of one machine printing the same device index hold the same GPU, unless each sees a
GPU of its own as that index (CUDA_VISIBLE_DEVICES set per process: every process then calls its
GPU 0, and NCCL's "cudaDev %d busId %lx" of its "Init COMPLETE" line tells the GPUs apart by
their PCI bus). NCCL refuses two ranks of one communicator on one GPU with ncclInvalidUsage
(src/init.cc, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %x", from 2.5;
a log cut before that WARN, or a check of its own that prints the result's number, keeps only
the result). So the same device in two processes' prefixes, no bus telling them apart, and an
ncclInvalidUsage: duplicate-gpu.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.prefixes import nccl_prefix
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import commas

# NCCL's "comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE" (from 2.19 with
# "nvmlDev %d" before busId): the GPU's PCI bus, whatever index the process calls it
_BUS = re.compile(r"\bcudaDev (\d+) (?:nvmlDev \d+ )?busId ([0-9a-fA-F]+)\b")
_INVALID = "ncclInvalidUsage"
_KEPT = 64  # (machine, device) pairs followed
_PIDS = 8  # processes kept per pair
_HEADS = 4096  # prefixes read (a thread's "host:pid:tid [dev]" is one)


class SharedDevice(Cause):
    kinds = frozenset(EventKind)  # (NCCL's prefix, and the refusal, on any line read)
    specificity = 15
    supersedes = GENERIC | {"invalid-usage"}

    def __init__(self) -> None:
        self.pids: dict[tuple[str, str], dict[str, Event]] = {}
        self.buses: dict[tuple[str, str], set[str]] = {}
        self.refused = Bag()  # the lines that name ncclInvalidUsage
        self.heads: set[str] = set()  # the NCCL prefixes read (one process's lines repeat one)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if any(f.kind in (FactKind.NCCL_RESULT, FactKind.NCCL_RETURN) and f.value == _INVALID
               for f in facts):
            self.refused.add(event)
        text = event.text
        head = text[: text.find(" NCCL ") + 1]  # (NCCL's prefix comes before it)
        if not head or (head in self.heads and "busId" not in text):
            return  # (a process's lines repeat one prefix)
        prefix = nccl_prefix(text)
        if prefix is None:
            return
        host, pid, device = prefix
        bus = _BUS.search(text)
        if bus and len(self.buses) < _KEPT:
            self.buses.setdefault((host, bus.group(1)), set()).add(bus.group(2).lower())
        if len(self.heads) < _HEADS:
            self.heads.add(head)
        pids = self.pids.get((host, device))
        if pids is None and len(self.pids) < _KEPT:
            pids = self.pids[(host, device)] = {}
        if pids is not None and len(pids) < _PIDS:
            pids.setdefault(pid, event)

    def finding(self, context: Context) -> Finding | None:
        if not self.refused:
            return None
        shared = [(key, pids) for key, pids in self.pids.items()
                  if len(pids) > 1 and len(self.buses.get(key, ())) < 2]
        if not shared:
            return None
        (host, device), pids = shared[0]
        text = _("On {host}, processes {pids} each print NCCL's lines for CUDA device [{device}], "
                 "and NCCL refused a call as invalid usage (ncclInvalidUsage), the result of its "
                 "check for two ranks on one GPU: the processes share that GPU. (Were each "
                 "process given a GPU of its own through CUDA_VISIBLE_DEVICES, each would call it "
                 "[0] too; NCCL's 'Init COMPLETE' lines then name different busId values.)",
                 host=host, pids=commas(list(pids)[:4]), device=device)
        shown = Bag()
        for event in list(pids.values())[:2]:
            shown.add(event)
        return made("duplicate-gpu", "error", text, None,
                    merge(shown.items, self.refused.items[:1]))
