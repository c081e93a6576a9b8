"""A process that finds no GPU to use: cuda-error, with the reason its words give.

torch says why where it first touches CUDA (torch/cuda/__init__.py ``_lazy_init``, v1.x to
v2.x): "Torch not compiled with CUDA enabled" (a CPU-only build: pip's default wheel on some
platforms, or a conda CPU package; torch 2.x's set_device says it as CPython's "module
'torch._C' has no attribute '_cuda_setDevice'": a CPU build's compiled core has no CUDA bindings),
"Found no NVIDIA driver on your system" and "CUDA driver
initialization failed, you might not have a CUDA gpu." (no usable driver); c10's "No CUDA GPUs
are available" (a driver, but no device visible to this process: CUDA_VISIBLE_DEVICES, a
container started without its GPUs), "No HIP GPUs are available" in a ROCm build (ROCm's
documentation of GPU isolation: ROCR_VISIBLE_DEVICES is applied first, HIP_VISIBLE_DEVICES and
CUDA_VISIBLE_DEVICES then number the devices it leaves). DeepSpeed's launcher says "Unable to proceed, no GPU
resources available" when it counts none; Slurm sets CUDA_VISIBLE_DEVICES to "NoDevFiles" for a
step given GPUs that gres.conf lists no device files for (the facts' ``NO_GPU``).
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


class NoGpu(Noting):
    needs = frozenset({FactKind.NO_GPU})
    specificity = 15
    supersedes = GENERIC | {"invalid-usage", "internal-error"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value for f in facts if f.kind is FactKind.NO_GPU])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        texts, fixes = [], []
        if "cpu-build" in self.values:
            texts.append(_("This torch is a CPU-only build: it has no CUDA at all."))
            fixes.append(_("Install a CUDA build of torch for this machine's driver (pip's "
                           "index URL for the CUDA version, e.g. .../whl/cu121); check with "
                           "python -c \"import torch; print(torch.version.cuda)\" (None: a CPU "
                           "build)."))
        if "no-driver" in self.values:
            texts.append(_("torch found no usable NVIDIA driver on this machine."))
            fixes.append(_("Check the driver: nvidia-smi; in a container, start it with its "
                           "GPUs (docker run --gpus all, the NVIDIA container toolkit)."))
        if "none-visible" in self.values:
            texts.append(_("No GPU was visible to the process: CUDA_VISIBLE_DEVICES hides "
                           "them, the container was started without them, or the machine has "
                           "none."))
            fixes.append(_("Check what the process sees: nvidia-smi -L and echo "
                           "$CUDA_VISIBLE_DEVICES in its environment (an empty value hides "
                           "every GPU); a scheduler gives GPUs only when asked (Slurm: --gpus)."))
        if "none-visible-rocm" in self.values:
            texts.append(_("No AMD GPU was visible to the process (a ROCm build of torch): "
                           "ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES "
                           "hide them. ROCR_VISIBLE_DEVICES is applied first and the other two "
                           "number the GPUs it leaves, so the same physical index in both hides "
                           "every GPU."))
            fixes.append(_("Check what the process sees: rocm-smi and its environment; select "
                           "GPUs with one variable only (ROCR_VISIBLE_DEVICES or "
                           "HIP_VISIBLE_DEVICES), or give the second one an index into the "
                           "GPUs the first leaves (0)."))
        if "slurm-no-device-files" in self.values:
            texts.append(_("Slurm set CUDA_VISIBLE_DEVICES to NoDevFiles: the job step holds "
                           "the GPU resource, but gres.conf names no device files for it, so "
                           "no program can tell which GPUs are its own."))
            fixes.append(_("Give the gres its devices in gres.conf (Name=gpu File=/dev/nvidia[0-"
                           "3]) or let Slurm detect them (AutoDetect=nvml), then restart slurmd; "
                           "ask for GPUs per step (srun --gpus-per-task=1 or --gres=gpu:N)."))
        return made("cuda-error", "error", sentences(texts), lines(fixes),
                    merge(self.bag.items))
