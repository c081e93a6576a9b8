"""torch's own check refusing a collective's or DDP's arguments: invalid-usage.

The Python wrappers of torch.distributed (distributed_c10d.py: ``work = group.allgather(...)``)
and DistributedDataParallel (nn/parallel/distributed.py) hand their arguments to C++, whose
checks (TORCH_CHECK in ProcessGroupNCCL.cpp, ProcessGroupGloo.cpp, reducer.cpp and comm.cpp:
"Tensors must be CUDA and dense", "All tensor operands to scatter/gather must have the same number
of dimensions", "DDP expects same model across all ranks, but Rank %d has %d params, ...") raise a
plain RuntimeError with the check's message. CPython's traceback then ends on the wrapper's frame,
so the exception is raised in a module of the distributed stack (the facts' ``FRAME`` and
``EXCEPTION``). Raised there, a RuntimeError whose words are not a failure of the network, a
peer, CUDA, memory or a timeout (another rule reads those), and not torch's subclasses for them
(DistBackendError, DistNetworkError, DistStoreError), is the call refused: what the script passed
(tensors of other shapes, devices or layouts on different ranks, a model that differs between
ranks) is not what the collective accepts. A message the catalogue knows is read there, and any
other rule's error says more.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made, others_first
from ddpkit.doctor.log.causes.raise_site import RaiseSites
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.messages import catalogue
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# the modules whose wrappers hand a collective's or DDP's arguments to torch's C++ checks
_WRAPPERS = ("torch.distributed.distributed_c10d", "torch.distributed.c10d_logger",
             "torch.nn.parallel.distributed")
# words of failures other rules read: the network, a peer, CUDA, memory, time, NCCL's and
# Gloo's own errors, torch's internal asserts
_NOT_A_REFUSAL = re.compile(r"(?i)connect|socket|peer|timed? ?out|timeout|abort|nccl error|"
                            r"gloo|cuda|cudnn|cublas|memory|internal assert|store|barrier|"
                            r"closed|reset|broken pipe|signal|killed")


class CollectiveCheck(Cause):
    needs = frozenset({FactKind.FRAME, FactKind.EXCEPTION})
    specificity = 0
    supersedes = GENERIC
    yields_to = others_first("invalid-usage")

    def __init__(self) -> None:
        self.sites = RaiseSites()
        self.refused: tuple[str, str] | None = None  # (module, message)
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for raised in self.sites.read(event, facts):
            if (self.refused is None and raised.installed
                    and raised.module.startswith(_WRAPPERS)
                    and raised.kind.rsplit(".", 1)[-1] == "RuntimeError"
                    and not _NOT_A_REFUSAL.search(raised.message)
                    and catalogue().match(raised.message) is None):
                self.refused = (raised.module, raised.message)
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.refused is None:
            return None
        module, message = self.refused
        text = _("torch refused the call's arguments in {module} ('{message}'): the tensors, "
                 "devices or model the script passed are not what that collective or "
                 "DistributedDataParallel accepts, or they differ between ranks.",
                 module=module, message=message)
        fix = _("Fix the call in the script: every rank must pass tensors of the same shape, "
                "dtype and device type, on its own GPU, in the same order of calls, and build "
                "the same model; rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL to have torch check "
                "each collective's arguments across ranks.")
        return made("invalid-usage", "error", text, fix, merge(self.bag.items))
