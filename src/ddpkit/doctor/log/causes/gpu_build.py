"""torch saying its CUDA build does not fit this machine's GPU or driver: version-mismatch.

A torch wheel carries GPU code for a list of architectures (``torch.cuda.get_arch_list()``) and
needs a driver at least as new as the CUDA it was built with. torch checks both where it first
touches CUDA and says so in its own words (the facts' ``GPU_BUILD``, printed.py): a GPU newer than
the build ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current
PyTorch installation", torch 2.9's "Found GPU0 ... which is of compute capability (CC) 12.0.",
torch 1.x's "which requires CUDA_VERSION >= ..."), a GPU older than the build supports ("PyTorch
no longer supports this GPU because it is too old"), or a driver older than the build's CUDA
("The NVIDIA driver on your system is too old (found version 11040)": the driver's CUDA, 11.4).
Each is a warning at first; the kernels or collectives that follow then fail ("no kernel image is
available", an illegal memory access, no GPU found), which this explains: the build does not fit
the node, the catalogue's ``version-mismatch``. With nothing failing it stays a warning.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import lines, sentences


def driver_cuda(version: str) -> str:
    """The CUDA version a driver's number stands for, as torch prints it (CUDA's
    ``cudaDriverGetVersion``: 1000 * major + 10 * minor): "11040" -> "11.4"."""
    number = int(version)
    return f"{number // 1000}.{number % 1000 // 10}"


class GpuBuild(Noting):
    needs = frozenset({FactKind.GPU_BUILD})
    specificity = 20
    supersedes = GENERIC | {"cuda-error", "invalid-usage", "internal-error"}

    def __init__(self) -> None:
        super().__init__()
        self.ways: dict[str, str] = {}  # which way the build does not fit -> the first detail printed with it

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.GPU_BUILD:
                self.ways.setdefault(fact.value, fact.detail)
                self.note(event, [fact.value])

    def finding(self, context: Context) -> Finding | None:
        if not self.ways:
            return None
        texts, fixes = [], []
        if "architecture" in self.ways:
            detail = self.ways["architecture"]
            texts.append(_("torch says this torch build has no GPU code for the machine's GPU "
                           "({detail}): the GPU is newer than the build, so its CUDA kernels "
                           "and NCCL's cannot run there.", detail=detail)
                         if detail else
                         _("torch says this torch build has no GPU code for the machine's GPU: "
                           "the GPU is newer than the build, so its CUDA kernels and NCCL's "
                           "cannot run there."))
            fixes.append(_("Install a torch build made for this GPU on every node (RTX 50-series "
                           "and B200, sm_100/sm_120: a CUDA 12.8 or newer build, pip install "
                           "torch --index-url https://download.pytorch.org/whl/cu128); python -c "
                           "\"import torch; print(torch.cuda.get_arch_list())\" lists the "
                           "architectures a build has."))
        if "old-gpu" in self.ways:
            texts.append(_("torch says the GPU is older than this torch build supports."))
            fixes.append(_("Install an older torch release whose builds still support this GPU, "
                           "the same one on every node, or run on newer GPUs."))
        if "driver" in self.ways:
            version = self.ways["driver"]
            texts.append(_("torch says the machine's NVIDIA driver is too old for this torch "
                           "build (the driver supports CUDA {cuda}; the build needs a newer "
                           "CUDA), so torch cannot use the GPUs.", cuda=driver_cuda(version)))
            fixes.append(_("Install a torch build for the driver's CUDA (nvidia-smi shows it, "
                           "top right; e.g. pip install torch --index-url "
                           "https://download.pytorch.org/whl/cu118), or a newer driver; the same "
                           "build on every node."))
        severity = context.severity
        return made("version-mismatch", severity, sentences(texts), lines(fixes),
                    merge(self.bag.items))
