"""A CUDA kernel that faulted: an illegal address or instruction, a misaligned address, a launch
failure, a device-side assert, too many resources for a launch.

CUDA's documentation of these errors (CUDA 12 runtime API, driver_types.h: cudaErrorIllegalAddress
700, cudaErrorIllegalInstruction 715, cudaErrorMisalignedAddress 716, cudaErrorLaunchFailure 719,
cudaErrorAssert 710, cudaErrorLaunchOutOfResources 701) says what failed (a kernel's memory
access or instruction) and that the context is unusable after it, not why: the kernel's own bug,
or a buffer another failure left unallocated or too small (NCCL's /dev/shm segment it could not
extend, memory that ran out). So the fault ranks at the catalogue's cuda-error priority, with no
specificity of its own: a cause another line of the log names (shm, out-of-memory, a version)
comes first, and where none does, the fault is the finding.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import Text, _

KERNEL_FAULTS = frozenset({"cudaErrorIllegalAddress", "cudaErrorIllegalInstruction",
                           "cudaErrorMisalignedAddress", "cudaErrorLaunchFailure",
                           "cudaErrorAssert", "cudaErrorLaunchOutOfResources"})


def kernel_fault_words(errors: str) -> tuple[Text, Text]:
    """(what the fault means, the fix) of a kernel that failed with ``errors``."""
    text = _("A CUDA kernel on that rank failed with {errors}: a fault in the program's "
             "own GPU code or a library's (an index out of range for a device-side assert), "
             "after which every CUDA call on that rank fails too.", errors=errors)
    fix = _("Rerun with CUDA_LAUNCH_BLOCKING=1 so the traceback names the failing "
            "operation; for a device-side assert, check indices and labels (e.g. a class "
            "label at or above the number of classes)")
    return text, fix


class KernelFault(Noting):
    needs = frozenset({FactKind.CUDA_ERROR})
    specificity = 0  # what failed, not why: a cause another line names ranks above it
    supersedes = GENERIC | {"cuda-error"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        found = [f.value for f in facts
                 if f.kind is FactKind.CUDA_ERROR and f.value in KERNEL_FAULTS]
        if found:
            self.note(event, found)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text, fix = kernel_fault_words(self.listed)
        severity = self.severity(context)
        return made("cuda-error", severity, text, fix, merge(self.bag.items))
