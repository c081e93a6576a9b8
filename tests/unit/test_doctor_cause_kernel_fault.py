"""causes/kernel_fault.py: a CUDA kernel's fault says what failed, not why, so a cause another
line names ranks above it (here the line before it, as a failure and its fault follow). Sources of the lines:

- CUDA 12 runtime API, driver_types.h: cudaErrorIllegalAddress (700) "an illegal memory access
  was encountered", cudaErrorLaunchFailure (719) "unspecified launch failure",
  cudaErrorECCUncorrectable (214) "uncorrectable ECC error encountered"
- torch v2.3.0 c10/cuda/CUDAException.cpp: ``CUDA error: %s``; DeepEP's EP_HOST_ASSERT-style
  check (csrc/deep_ep.cpp, CUDA_CHECK): ``Failed: CUDA error %s:%d '%s'``
- NCCL v2.22 src/misc/shmutils.cc: ``WARN("Error: failed to extend %s to %ld bytes, error: %s
  (%d)", ...)`` with strerror(ENOSPC) and 28
- torch v2.3.0 c10/cuda/CUDACachingAllocator.cpp: ``CUDA out of memory. Tried to allocate %s``
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TORCH = "RuntimeError: CUDA error: {text}"
DEEPEP = "  what():  Failed: CUDA error /src/DeepEP/csrc/deep_ep.cpp:89 '{text}'"
SHM_FULL = ("host1:811:900 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend "
            "/dev/shm/nccl-Xa12bc to 10486116 bytes, error: No space left on device (28)")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
       "total capacity of 79.15 GiB of which 1.02 GiB is free.")


@pytest.mark.parametrize("template", [TORCH, DEEPEP])
@pytest.mark.parametrize("fault", ["an illegal memory access was encountered",
                                   "unspecified launch failure"])
def test_a_fault_alone_is_a_cuda_error(tmp_path: Path, template: str, fault: str) -> None:
    found = top(tmp_path, ["step 10 loss 2.31", template.format(text=fault)])
    assert found.id == "cuda-error" and found.severity == "error"
    assert "CUDA_LAUNCH_BLOCKING=1" in found.fix


@pytest.mark.parametrize(("before", "cause"), [(SHM_FULL, "shm"), (OOM, "out-of-memory")])
def test_a_cause_another_line_names_ranks_above_the_fault(tmp_path: Path, before: str,
                                                             cause: str) -> None:
    found = top(tmp_path, [before, DEEPEP.format(text="an illegal memory access was encountered"),
                           TORCH.format(text="an illegal memory access was encountered")])
    assert found.id == cause


def test_a_hardware_error_beside_the_fault_is_named(tmp_path: Path) -> None:
    found = top(tmp_path, [TORCH.format(text="an illegal memory access was encountered"),
                           TORCH.format(text="uncorrectable ECC error encountered")])
    assert found.id == "cuda-error" and "ECC" in found.fix
