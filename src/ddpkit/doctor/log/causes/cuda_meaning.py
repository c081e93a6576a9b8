"""A CUDA error whose documented meaning names the cause.

Every CUDA check macro prints ``cudaGetErrorString``'s text (torch's ``CUDA error: %s``, NCCL's
``Cuda failure '%s'``, vLLM's ``Failed: Cuda error %s:%d '%s'``, TensorRT-LLM's ``CUDA runtime
error in %s: %s``); the facts read it as the error's name (``CUDA_ERROR``, facts/kinds.py). What
each error means is CUDA's own documentation (CUDA 12 runtime API, ``cudaError`` in
driver_types.h; the driver API's cuGetErrorString for CUDA_ERROR_ILLEGAL_STATE; the CUDA C++
Programming Guide for the limit of eight peer connections per device): a few of them name a
cause another finding explains (GPU peer-to-peer, the driver or the GPU against the build), the
others say what failed on the GPU itself (a kernel's own fault is kernel_fault.py's). cuDNN's
and cuBLAS's statuses, as torch's checks print them (``cuDNN error:
CUDNN_STATUS_NOT_INITIALIZED``, ``CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling
`cublasCreate(handle)```), are read by their libraries' API references the same way: an
allocation that failed is memory, an architecture mismatch the build. Peer access and an invalid
ordinal have causes of their own (peer_access.py, device_ordinal.py).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.causes.kernel_fault import kernel_fault_words
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_DRIVER = frozenset({"cudaErrorSystemDriverMismatch", "cudaErrorCompatNotSupportedOnDevice",
                     "cudaErrorUnsupportedPtxVersion"})
_HARDWARE = frozenset({"cudaErrorECCUncorrectable", "cudaErrorNvlinkUncorrectable"})
# cuDNN's and cuBLAS's statuses (their API references): the library could not allocate its GPU
# memory; the GPU lacks a feature the library's build needs; its handle could not be made (an
# error of the CUDA runtime below it or of the hardware setup, often a GPU whose memory others
# hold); its kernel failed on the GPU or it failed inside
_LIBRARY_MEMORY = frozenset({"CUDNN_STATUS_ALLOC_FAILED", "CUBLAS_STATUS_ALLOC_FAILED"})
_LIBRARY_ARCH = frozenset({"CUDNN_STATUS_ARCH_MISMATCH", "CUBLAS_STATUS_ARCH_MISMATCH"})
_LIBRARY_START = frozenset({"CUDNN_STATUS_NOT_INITIALIZED", "CUBLAS_STATUS_NOT_INITIALIZED"})
_LIBRARY_KERNEL = frozenset({"CUDNN_STATUS_EXECUTION_FAILED", "CUBLAS_STATUS_EXECUTION_FAILED",
                             "CUDNN_STATUS_MAPPING_ERROR", "CUBLAS_STATUS_MAPPING_ERROR",
                             "CUDNN_STATUS_INTERNAL_ERROR", "CUBLAS_STATUS_INTERNAL_ERROR"})
# the build has no code for the GPU's architecture (CUDA's and HIP's words; driver_types.h,
# hip_code_object.cpp)
_NO_CODE = frozenset({"cudaErrorNoKernelImageForDevice", "cudaErrorInvalidDeviceFunction",
                      "hipErrorNoBinaryForGpu"})
# (a kernel's own fault is kernel_fault.py's)
_READ = _DRIVER | _HARDWARE | _LIBRARY_MEMORY | _LIBRARY_ARCH | _LIBRARY_START | (
    _LIBRARY_KERNEL) | {
    "cudaErrorTooManyPeers", "cudaErrorNoKernelImageForDevice", "cudaErrorNoDevice",
    "cudaErrorInvalidDeviceFunction", "hipErrorNoBinaryForGpu",
    "cudaErrorDevicesUnavailable", "cudaErrorSystemNotReady", "CUDA_ERROR_ILLEGAL_STATE"}


class CudaMeaning(Noting):
    needs = frozenset({FactKind.CUDA_ERROR})
    specificity = 12
    supersedes = GENERIC | {"cuda-error"}

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None  # the first error read: the one the others followed

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        found = [f.value for f in facts if f.kind is FactKind.CUDA_ERROR and f.value in _READ]
        if found:
            self.first = self.first or found[0]
            self.note(event, found)

    def finding(self, context: Context) -> Finding | None:
        if self.first is None:
            return None
        finding_id, text, fix = _meaning(self.first, self.listed)
        severity = self.severity(context)
        return made(finding_id, severity, text, fix, merge(self.bag.items))


def _build_for_this_gpu() -> str:
    return _("Install a build made for this GPU: python -c \"import torch; "
             "print(torch.cuda.get_device_capability(), torch.cuda.get_arch_list())\" shows the "
             "GPU's compute capability and the architectures the build has")


def _meaning(name: str, errors: str) -> tuple[str, str, str]:
    """(finding id, what the error means here, the fix) of the first error read."""
    if name == "cudaErrorTooManyPeers":
        return ("p2p", _(
            "A CUDA call failed with {errors}: a GPU can hold peer-to-peer mappings to at most "
            "eight other GPUs, and a process asked for more (one machine with more than eight "
            "GPUs used as one peer group, e.g. more than eight processes per node).",
            errors=errors), _(
            "Start at most eight GPU processes per machine that share peer access (the "
            "launcher's --nproc-per-node, accelerate's num_processes, CUDA_VISIBLE_DEVICES), "
            "or turn NCCL's P2P off: export NCCL_P2P_DISABLE=1"))
    if name in _LIBRARY_MEMORY:
        return ("out-of-memory", _(
            "A CUDA library call failed with {errors}: the library could not allocate the GPU "
            "memory it needs (the GPU is full: this rank's tensors, or another process or rank "
            "on the same GPU).", errors=errors), _(
            "Free GPU memory: a smaller batch per GPU, activation checkpointing, or sharding "
            "(FSDP, ZeRO); nvidia-smi shows other processes holding the GPU"))
    if name in _LIBRARY_ARCH:
        return ("version-mismatch", _(
            "A CUDA library call failed with {errors}: the GPU lacks a feature the library's "
            "build needs (a build made for other GPUs).", errors=errors), _build_for_this_gpu())
    if name in _DRIVER:
        return ("version-mismatch", _(
            "A CUDA call failed with {errors}: the CUDA the program was built with does not "
            "fit this machine's driver (a driver older than the build's CUDA, a CUDA "
            "forward-compatibility package on a GPU that does not support it, or a libcuda "
            "in the container that differs from the kernel driver).", errors=errors), _(
            "Compare the highest CUDA version the driver supports (nvidia-smi, top right) with "
            "the build's (python -c \"import torch; print(torch.version.cuda)\"); install a "
            "torch build for the driver's CUDA or a newer driver, and remove cuda-compat "
            "packages and LD_LIBRARY_PATH entries that bring another libcuda"))
    if name in _NO_CODE:
        return ("version-mismatch", _(
            "A CUDA call failed with {errors}: the build has no code for this GPU's "
            "architecture (a newer GPU than the build knows, or a build for other GPUs).",
            errors=errors), _build_for_this_gpu())
    if name == "cudaErrorNoDevice":
        text = _("A CUDA call failed with {errors}: the process sees no GPU (the driver is not "
                 "loaded, the container was started without GPUs, or CUDA_VISIBLE_DEVICES is "
                 "empty or names no GPU).", errors=errors)
        fix = _("Run nvidia-smi on that machine; check CUDA_VISIBLE_DEVICES in the ranks' "
                "environment; start a container with its GPUs (docker run --gpus all)")
    elif name == "cudaErrorDevicesUnavailable":
        text = _("A CUDA call failed with {errors}: the GPU is in an exclusive compute mode and "
                 "another process already holds it (often a second rank on the same GPU, or "
                 "another job).", errors=errors)
        fix = _("See which processes hold the GPUs (nvidia-smi) and the compute mode "
                "(nvidia-smi -q -d COMPUTE); give each rank its own GPU "
                "(torch.cuda.set_device(local_rank))")
    elif name == "cudaErrorSystemNotReady":
        text = _("A CUDA call failed with {errors}: the machine is not ready for CUDA work. On "
                 "8-GPU machines with NVSwitch (HGX/DGX A100, H100, H200) this means the NVIDIA "
                 "Fabric Manager is not running or its version differs from the driver's.",
                 errors=errors)
        fix = _("Check the Fabric Manager: systemctl status nvidia-fabricmanager; install the "
                "one of the driver's exact version and start it, or ask the provider to")
    elif name == "CUDA_ERROR_ILLEGAL_STATE":
        text = _("A CUDA call failed with {errors}: the driver refused an operation in the GPUs' "
                 "present state. NCCL reports it when binding NVLink SHARP (NVLS) multicast "
                 "memory while the Fabric Manager or the NVSwitches are not in order.",
                 errors=errors)
        fix = _("Check the Fabric Manager (systemctl status nvidia-fabricmanager) and reset the "
                "GPUs or restart the machine; until then, run without NVLS: export "
                "NCCL_NVLS_ENABLE=0")
    elif name in _LIBRARY_START:
        text = _("A CUDA library call failed with {errors}: the library could not start on the "
                 "GPU (its handle was not made): the CUDA runtime below it failed, most often "
                 "because the GPU's memory is already held (another rank or process on the same "
                 "GPU) or the GPU is in a bad state.", errors=errors)
        fix = _("See what holds the GPU (nvidia-smi); give each rank its own GPU "
                "(torch.cuda.set_device(local_rank) before any CUDA work); rerun with "
                "CUDA_LAUNCH_BLOCKING=1 to see the first failing call")
    elif name in _HARDWARE:
        text = _("A CUDA call failed with {errors}: the GPU or its NVLink reported an "
                 "uncorrectable hardware error.", errors=errors)
        fix = _("Check the GPU: nvidia-smi -q -d ECC and nvidia-smi nvlink -e; on a rented "
                "instance, move to another machine and tell the provider")
    else:  # a library's kernel that failed on the GPU or inside (_LIBRARY_KERNEL)
        text, fix = kernel_fault_words(errors)
    return ("cuda-error", text, fix)
