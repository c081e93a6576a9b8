"""NCCL's ncclUnhandledCudaError: a CUDA call inside NCCL failed.

``ncclGetErrorString(ncclUnhandledCudaError)`` is "unhandled cuda error" (NCCL src/init.cc,
every release from 2.0; nccl-tests' NCCLCHECK prints it as ``NCCL failure %s:%d '%s'``, torch as
``NCCL error in: ..., unhandled cuda error``, glog's ``Check failed: result == ncclSuccess``).
Named as the catalogue's ``cuda-error`` where no rule reads the line (older nccl-tests' "NCCL
failure", a glog check): a rule's ``rank-failed`` on an NCCL error says more.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event

UNHANDLED = "ncclUnhandledCudaError"


class UnhandledCuda(NotingValues):
    needs = frozenset({FactKind.NCCL_RESULT})
    finding_id = "cuda-error"
    specificity = 0
    # (rank-failed's own reading of an NCCL error, with NCCL_DEBUG=INFO as the next step, says
    # more where a rule gives it: nccl-tests' "Test NCCL failure", torch's "NCCL error in:")
    supersedes = GENERIC - {"rank-failed"}
    yields_to = frozenset({"rank-failed"})

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if any(f.kind is FactKind.NCCL_RESULT and f.value == UNHANDLED for f in facts):
            self.note(event, [UNHANDLED])

    def words(self) -> tuple[tuple[str, ...], None]:
        return (), None  # the catalogue's words
