"""causes/peer_access.py: CUDA's peer-access errors, read by cudaGetErrorString()'s text
whatever check macro printed it, are named p2p. Sources of the lines:

- CUDA runtime API (driver_types.h, cudaError_t): cudaErrorPeerAccessUnsupported (217) "peer
  access is not supported between these two devices", cudaErrorPeerAccessNotEnabled (705)
  "peer access has not been enabled", cudaErrorPeerAccessAlreadyEnabled (704) "peer access is
  already enabled"; the driver API's CUDA_ERROR_PEER_ACCESS_UNSUPPORTED "peer access is not
  supported across the given devices"
- vLLM v0.4.3 csrc/custom_all_reduce.cuh, CUDACHECK: ``printf("Failed: Cuda error %s:%d
  '%s'\\n", __FILE__, __LINE__, cudaGetErrorString(e))`` (SGLang used vLLM's kernels)
- TensorRT-LLM v0.10.0 cpp/include/tensorrt_llm/common/cudaUtils.h, check():
  ``"[TensorRT-LLM][ERROR] CUDA runtime error in %s: %s"``
- torch v2.3.0 c10/cuda/CUDAException.cpp: ``CUDA error: %s``
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

UNSUPPORTED = "peer access is not supported between these two devices"
NOT_ENABLED = "peer access has not been enabled"
DRIVER = "peer access is not supported across the given devices"
VLLM = "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:{line} '{text}'"
TRTLLM = "[TensorRT-LLM][ERROR] CUDA runtime error in cudaDeviceEnablePeerAccess: {text}"
TORCH = "RuntimeError: CUDA error: {text}"


@pytest.mark.parametrize("template", [VLLM, TRTLLM, TORCH])
@pytest.mark.parametrize("text", [UNSUPPORTED, NOT_ENABLED, DRIVER])
def test_a_peer_access_error_is_p2p(tmp_path: Path, template: str, text: str) -> None:
    found = top(tmp_path, ["[gpu_id=0] Init nccl begin.", template.format(line=307, text=text)])
    assert (found.id, found.severity) == ("p2p", "error")
    assert "custom-all-reduce" in found.fix and "NCCL_P2P_DISABLE=1" in found.fix


def test_peer_access_already_enabled_is_no_failure(tmp_path: Path) -> None:
    found = top(tmp_path, [VLLM.format(line=307, text="peer access is already enabled")])
    assert found.id != "p2p"


def test_a_warning_level_line_alone_is_at_most_a_warning(tmp_path: Path) -> None:
    # c10's warning prefix ("[W ...]") on the same CUDA text, nothing failing
    found = top(tmp_path, [f"[W CUDAGuardImpl.h:115] Warning: CUDA warning: {NOT_ENABLED}"])
    assert found.id != "p2p" or found.severity == "warning"
