"""A CUDA check macro's failure whose error no other cause reads: cuda-error, in its own words.

Every CUDA check macro prints the error's text when a CUDA call fails (torch's "CUDA error: %s",
NCCL's "Cuda failure '%s'", vLLM's "Failed: Cuda error %s:%d '%s'", THC's "cuda runtime error
(%d) : %s", TensorRT-LLM's "CUDA runtime error in %s: %s"; the facts' ``CUDA_CHECK``). The
errors whose documented meaning names a cause are cuda_meaning.py's (cuDNN's and cuBLAS's
statuses too), peer_access.py's and device_ordinal.py's, out of memory is its own finding's; any
other, "invalid argument" or "operation not permitted", is still a CUDA call that failed on a
rank: the catalogue's ``cuda-error``, quoting the error, rather than a rank that failed for no
stated reason.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made, others_first
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import CUDA_ERRORS, CUDA_LIBRARY_STATUSES, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_READ_ELSEWHERE = tuple(text.lower() for text in (*CUDA_ERRORS, *CUDA_LIBRARY_STATUSES)) + (
    "out of memory",)


class CudaCheck(Noting):
    needs = frozenset({FactKind.CUDA_CHECK})
    specificity = 0
    supersedes = GENERIC
    # (any other rule's error names more than "a CUDA call failed")
    yields_to = others_first("cuda-error")

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        said = [f.value for f in facts if f.kind is FactKind.CUDA_CHECK
                and not any(known in f.value.lower() for known in _READ_ELSEWHERE)]
        if said:
            self.note(event, said)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("A CUDA call failed on a rank with \"{errors}\", as its check macro reported "
                 "it.", errors=self.listed)
        return made("cuda-error", "error", text, None, merge(self.bag.items))
