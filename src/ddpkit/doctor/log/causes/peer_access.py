"""CUDA's peer access between two GPUs unsupported or not enabled.

The error's text is ``cudaGetErrorString``'s, whatever check macro printed it (the facts'
``CUDA_ERROR``): vLLM's and SGLang's custom all-reduce (``Failed: Cuda error
.../custom_all_reduce.cuh:N 'peer access is not supported between these two devices'``),
TensorRT-LLM's (``[TensorRT-LLM][ERROR] CUDA runtime error in ...: peer access is not supported
...``), torch's (``CUDA error: peer access ...``). Consumer GPUs (RTX 4090) and many cloud VMs'
IOMMU or PCIe ACS settings give no P2P between the GPUs; custom all-reduce kernels need it.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# (cudaErrorPeerAccessAlreadyEnabled is no failure: a second enable of the same pair)
_FAILED = frozenset({"cudaErrorPeerAccessUnsupported", "cudaErrorPeerAccessNotEnabled"})


class PeerAccess(Noting):
    needs = frozenset({FactKind.CUDA_ERROR})
    specificity = 20
    supersedes = GENERIC | {"cuda-error", "p2p"}  # (its own words for the old rule's p2p)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        found = [f"'{f.detail}' ({f.value})" if f.detail else f.value for f in facts
                 if f.kind is FactKind.CUDA_ERROR and f.value in _FAILED]
        if found:
            self.note(event, found)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("A CUDA call failed with {errors}: the GPUs of this machine cannot reach each "
                 "other's memory directly (peer-to-peer), which custom all-reduce kernels "
                 "(vLLM, SGLang, TensorRT-LLM) and NCCL's P2P transport need.",
                 errors=self.listed)
        fix = _("Turn off what needs P2P: vLLM --disable-custom-all-reduce, SGLang "
                "--disable-custom-all-reduce, TensorRT-LLM's engine built with custom all-reduce "
                "off; for NCCL: export NCCL_P2P_DISABLE=1\n"
                "Check the GPUs' P2P: nvidia-smi topo -p2p r (consumer GPUs have none; on bare "
                "metal, check IOMMU and PCIe ACS)")
        severity = self.severity(context)
        return made("p2p", severity, text, fix, merge(self.bag.items))
