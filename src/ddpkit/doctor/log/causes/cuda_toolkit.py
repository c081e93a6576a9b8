"""DeepSpeed refusing to build its ops with a CUDA toolkit other than torch's: version-mismatch.

DeepSpeed compiles its C++/CUDA ops (at install with DS_BUILD_OPS=1, or just in time as a job
first uses one) with the toolkit it finds (nvcc, CUDA_HOME). Its op builder
(op_builder/builder.py, ``assert_no_cuda_mismatch``, v0.3 to v0.19) compares that toolkit's
version with ``torch.version.cuda`` and raises "Installed CUDA version <x> does not match the
version torch was compiled with <y>, unable to compile cuda/cpp extensions without a matching
cuda version." (``CUDAMismatchException`` from v0.8, a bare ``Exception`` before). Where both are
minor versions of one major it prints the same words and goes on ("but since the APIs are
compatible, accepting this combination"), as it does with DS_SKIP_CUDA_CHECK=1: those lines are
no refusal (the facts leave them out). The build does not fit the node: the catalogue's
``version-mismatch``. So is nvcc, the toolkit's compiler, refusing the GPU's architecture as such
a build compiles for it ("nvcc fatal   : Unsupported gpu architecture 'compute_89'"): the toolkit
is older than the GPU.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues, keep_few
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class CudaToolkit(NotingValues):
    needs = frozenset({FactKind.TOOLKIT_MISMATCH})
    specificity = 20
    finding_id = "version-mismatch"
    supersedes = GENERIC | {"cuda-error"}

    def __init__(self) -> None:
        super().__init__()
        self.architectures: dict[str, None] = {}  # GPU architectures nvcc did not know

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        mine = [f for f in facts if f.kind is FactKind.TOOLKIT_MISMATCH]
        keep_few(self.architectures, [f.detail for f in mine if f.value == "nvcc"])
        self.note(event, [_("CUDA {installed} installed, torch built for {torch}",
                            installed=f.value, torch=f.detail)
                          for f in mine if f.value != "nvcc"])

    def words(self) -> tuple[str, str]:
        if self.architectures and not self.values:
            text = _("nvcc, the CUDA toolkit's compiler, does not know this GPU's architecture "
                     "({architectures}): the toolkit that builds the framework's CUDA ops is "
                     "older than the GPU.", architectures=", ".join(self.architectures))
            fix = _("Install a CUDA toolkit new enough for the GPU (its release notes list the "
                    "architectures each supports) and point CUDA_HOME at it, or use a framework "
                    "wheel with the ops prebuilt for this GPU; the torch build should match the "
                    "toolkit's CUDA as well.")
            return text, fix
        text = _("DeepSpeed would not compile its ops: the CUDA toolkit it found is not the CUDA "
                 "this torch was built with ({versions}).", versions=self.listed)
        fix = _("Point CUDA_HOME (and PATH's nvcc) at a toolkit of torch's CUDA version "
                "(python -c \"import torch; print(torch.version.cuda)\"), or install the torch "
                "build for the installed toolkit; then reinstall DeepSpeed. Every node needs the "
                "same toolkit and torch.")
        return text, fix
