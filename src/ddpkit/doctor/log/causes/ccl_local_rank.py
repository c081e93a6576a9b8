"""oneCCL finding no local rank or local size: its launcher did not give it them.

oneCCL (Intel's collective library, the ``ccl`` backend of torch on XPU) reads each process's
index and count on its machine from an MPI launcher's variables, or from CCL_LOCAL_RANK and
CCL_LOCAL_SIZE where CCL_PROCESS_LAUNCHER=none (oneCCL's environment variables). torchrun and
accelerate launch set neither, so oneCCL warns "could not get local_idx/count from environment
variables" and, where it cannot get them from its transport either, fails ("|CCL_ERROR| ...
failed to get local_idx/count from ATL"): local-rank-argument, the launcher and the program not
agreeing on how the local rank is passed.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC, entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class CclLocalRank(Cause):
    kinds = frozenset({EventKind.JOB_FACT})
    specificity = 20
    supersedes = GENERIC | {"internal-error"}

    def __init__(self) -> None:
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if event.get("detail").startswith("could not get local_idx/count"):
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag or not context.failed:  # (a warning: the transport may still find them)
            return None
        text = _("oneCCL (the ccl backend, on Intel GPUs) found no local rank and local size for "
                 "its process: it reads them from an MPI launcher's variables, or from "
                 "CCL_LOCAL_RANK and CCL_LOCAL_SIZE, and the launcher that started the process "
                 "(torchrun, accelerate launch) set neither.")
        fix = _("Start the job with an MPI launcher (mpirun), or set in each process's "
                "environment CCL_PROCESS_LAUNCHER=none, CCL_LOCAL_RANK=$LOCAL_RANK and "
                "CCL_LOCAL_SIZE=$LOCAL_WORLD_SIZE (newer accelerate releases set them).")
        # (the catalogue's own words are torch.distributed.launch's --local_rank contract, which
        # this is not: the cause's words alone)
        known = entry("local-rank-argument")
        return Finding(known.id, "error", known.title, text, fix, merge(self.bag.items))
