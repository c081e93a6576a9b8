"""A rank's DataLoader worker killed by a signal: the rank fails, and its peers lose it.

torch's DataLoader runs its workers as child processes and, in the rank, checks them on SIGCHLD
(torch/csrc/DataLoader.cpp): a worker a signal killed is reported in the rank's own words,
"DataLoader worker (pid N) is killed by signal: <strsignal>." (for SIGBUS with "It is possible
that dataloader's workers are out of shared memory"). The rank then raises, exits, and its
peers' next collective fails on the lost connection or times out: those are the aftermath. A
worker's tensors reach the rank through shared memory file descriptors (torch.multiprocessing's
file_descriptor strategy), so the rank's traceback often passes through a ConnectionResetError
of Python's own multiprocessing connection first: local, not a network peer.

- SIGKILL ("Killed"): nothing in a DataLoader sends it; on Linux it is most often the kernel's
  OOM killer taking the largest process when host memory runs out (every worker holds its own
  copy of the dataset's Python objects): out-of-memory, with the check that confirms it.
- SIGBUS ("Bus error"): a write to /dev/shm that the full tmpfs cannot back: shm.
Other signals (a segmentation fault in a decoding library) are left to the rules that read a
rank's failure.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC, entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.causes.silent_kill import oom_killer_check
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import lines


class LoaderWorkerKilled(Cause):
    needs = frozenset({FactKind.LOADER_WORKER_KILLED})
    specificity = 30
    # (the rank it took down, and the peers that lost it)
    supersedes = GENERIC | {"connection-lost", "collective-timeout"}

    def __init__(self) -> None:
        self.killed: Fact | None = None  # the first worker killed by SIGKILL or SIGBUS
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if (fact.kind is FactKind.LOADER_WORKER_KILLED and self.killed is None
                    and fact.value in ("SIGKILL", "SIGBUS")):
                self.killed = fact
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.killed is None:
            return None
        pid = self.killed.detail
        if self.killed.value == "SIGBUS":
            text = _("A DataLoader worker (pid {pid}) was killed by SIGBUS: a write to shared "
                     "memory (/dev/shm) that the full /dev/shm could not hold. Its rank failed "
                     "with it, and its peers lost that rank.", pid=pid)
            return made("shm", "error", text, entry("shm").fix, merge(self.bag.items))
        text = _("A DataLoader worker (pid {pid}) was killed by SIGKILL, and its rank failed with "
                 "it; its peers then lost that rank. Nothing in a DataLoader sends SIGKILL: it is "
                 "most likely the kernel's OOM killer reclaiming host memory (RAM, not the GPU's), "
                 "since every worker holds its own copy of the dataset's Python objects; a "
                 "scheduler or a user can send it too.", pid=pid)
        fix = lines([oom_killer_check(),
                     _("If it was the OOM killer: fewer workers (num_workers) and a smaller "
                       "prefetch_factor, datasets that keep numpy arrays or memory-mapped files "
                       "rather than Python lists of objects, or more RAM for the job.")])
        return made("out-of-memory", "error", text, fix, merge(self.bag.items))
