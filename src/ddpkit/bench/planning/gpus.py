"""The GPUs people rent for training: memory per GPU and the typical link between GPUs of a node.

Pure data. Sources (docs/plan.md, "GPU table"): NVIDIA's product pages and datasheets for memory
and NVLink bandwidth; memory is the total ``nvidia-smi`` reports (MiB), which is what the allocator
can at best use. ``intra_busbw`` is a *typical* intra-node all-reduce busbw per GPU, bytes/s: the
NVLink bandwidth per direction for SXM parts (what nccl-tests' busbw approaches), and a PCIe 4.0
x16 class figure for PCIe cards (GeForce 4090s have peer-to-peer disabled, so their traffic goes
through host memory: lower). Pass ``--intra-node`` for a measured figure.

``host_per_gpu`` is the RAM of a typical rented instance divided by its GPUs (AWS's 8-GPU sizes
where one exists: p4d/p4de 1152 GiB, p5/p5en 2048 GiB, g5.48xlarge 768 GiB, g6e.48xlarge
1536 GiB; GeForce and Chinese-cloud 8-GPU servers commonly 512 GiB-1 TiB): the default for
``--host-memory``, the check for CPU offload, said in the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit.errors import UsageError
from ddpkit.i18n import _

MIB = 2**20
GIB = 2**30


@dataclass(frozen=True)
class Gpu:
    name: str  # canonical key: 4090, a100-80gb, h100 ...
    title: str  # what people call it
    memory_bytes: int
    intra_busbw: float  # bytes/s, typical intra-node all-reduce busbw per GPU
    link: str  # what connects the GPUs of one node
    host_per_gpu: int = 64 * 2**30  # RAM of a typical instance / its GPUs, bytes


_PCIE4 = 20e9  # the plan's existing PCIe-class default
_G = 2**30
GPUS: tuple[Gpu, ...] = (
    Gpu("3090", "RTX 3090 24GB", 24576 * MIB, _PCIE4, "PCIe 4.0 x16", 64 * _G),
    Gpu("4090", "RTX 4090 24GB", 24564 * MIB, 10e9, "PCIe 4.0 x16, no peer-to-peer", 64 * _G),
    Gpu("4090d", "RTX 4090 D 24GB", 24564 * MIB, 10e9, "PCIe 4.0 x16, no peer-to-peer", 64 * _G),
    Gpu("a10", "A10 24GB", 23028 * MIB, _PCIE4, "PCIe 4.0 x16", 96 * _G),
    Gpu("l4", "L4 24GB", 23034 * MIB, _PCIE4, "PCIe 4.0 x16", 96 * _G),
    Gpu("l20", "L20 48GB", 46068 * MIB, _PCIE4, "PCIe 4.0 x16", 128 * _G),
    Gpu("a6000", "RTX A6000 48GB", 49140 * MIB, _PCIE4, "PCIe 4.0 x16", 128 * _G),
    Gpu("l40s", "L40S 48GB", 46068 * MIB, _PCIE4, "PCIe 4.0 x16", 192 * _G),
    Gpu("v100-32gb", "V100 SXM2 32GB", 32768 * MIB, 150e9, "NVLink 2 (300 GB/s total)", 96 * _G),
    Gpu("a100-40gb", "A100 SXM4 40GB", 40960 * MIB, 300e9, "NVLink 3 (600 GB/s total)", 144 * _G),
    Gpu("a100-80gb", "A100 SXM4 80GB", 81920 * MIB, 300e9, "NVLink 3 (600 GB/s total)", 144 * _G),
    Gpu("a800-40gb", "A800 SXM4 40GB", 40960 * MIB, 200e9, "NVLink 3 (400 GB/s total)", 128 * _G),
    Gpu("a800-80gb", "A800 SXM4 80GB", 81920 * MIB, 200e9, "NVLink 3 (400 GB/s total)", 128 * _G),
    Gpu("h100", "H100 SXM5 80GB", 81559 * MIB, 450e9, "NVLink 4 (900 GB/s total)", 256 * _G),
    Gpu("h800", "H800 SXM5 80GB", 81559 * MIB, 200e9, "NVLink 4 (400 GB/s total)", 256 * _G),
    Gpu("h20", "H20 96GB", 97871 * MIB, 450e9, "NVLink 4 (900 GB/s total)", 256 * _G),
    Gpu("h200", "H200 SXM 141GB", 143771 * MIB, 450e9, "NVLink 4 (900 GB/s total)", 256 * _G),
)
_ALIASES = {"a100": "a100-80gb", "a800": "a800-80gb", "v100": "v100-32gb", "a100-40": "a100-40gb",
            "a100-80": "a100-80gb", "a800-40": "a800-40gb", "a800-80": "a800-80gb", "4090-d": "4090d",
            "a6000-48gb": "a6000", "l20-48gb": "l20"}

# Kept free of model state: the CUDA context, NCCL's buffers and the caching allocator's
# fragmentation. A rule of thumb, stated in the output (docs/plan.md).
RESERVE_BYTES = 2 * GIB


def names() -> tuple[str, ...]:
    return tuple(g.name for g in GPUS)


def find_gpu(text: str) -> Gpu:
    """A GPU by name, forgiving of case, vendor words and spaces: ``4090``, ``RTX 4090``, ``A100-80GB``."""
    key = text.strip().lower().replace("_", "-").replace(" ", "-")
    for prefix in ("nvidia-", "geforce-", "rtx-", "tesla-"):
        key = key.removeprefix(prefix)
    key = key.replace("-sxm", "").replace("-pcie", "")
    key = _ALIASES.get(key, key)
    for gpu in GPUS:
        if key in (gpu.name, gpu.name.replace("-", "")):
            return gpu
    raise UsageError("unknown-gpu", _("--gpu {text!r} is not in ddpkit's GPU table", text=text),
                     _("use one of {names}, or give --gpu-memory 24GiB", names=", ".join(names())))


def usable_bytes(memory_bytes: int) -> int:
    """What model state and activations may take: total minus :data:`RESERVE_BYTES`."""
    return max(0, memory_bytes - RESERVE_BYTES)
