"""causes/nvls_bind.py: NCCL failing to bind NVLink SHARP (NVLS) multicast memory is cuda-error
naming the Fabric Manager, whatever CUDA's error. Lines made from NCCL's templates
(src/transport/nvls.cc, v2.29.2-1 to v2.30.7-1: WARN("Failed to bind NVLink SHARP (NVLS) Multicast
memory of size %ld : CUDA error %d '%s'.\\nThis is usually caused by a system or configuration
error in the Fabric Manager or NVSwitches.\\nDisable NVLS (NCCL_NVLS_ENABLE=0) if you wish to
avoid this error in the future."); 2.27 and 2.28's INFO "... Proceeding without NVLS support.");
NCCL's WARN prefix (src/debug.cc) and torch's "NCCL error in: %s, unhandled cuda error, NCCL
version %s" with its "ncclUnhandledCudaError: Call to CUDA function failed." detail; CUDA's
error texts (cuGetErrorString: 2 'out of memory', 401 'the operation cannot be performed in the
present state')."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TORCH = ["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
         "NCCLUtils.cpp:93, unhandled cuda error, NCCL version 2.29.7",
         "ncclUnhandledCudaError: Call to CUDA function failed."]


def warn(code: int, text: str, prefix: str = "") -> list[str]:
    return [f"{prefix}Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : "
            f"CUDA error {code} '{text}'.",
            "This is usually caused by a system or configuration error in the Fabric Manager or "
            "NVSwitches.",
            "Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future."]


@pytest.mark.parametrize(("code", "text"), [
    (2, "out of memory"), (401, "the operation cannot be performed in the present state"),
    (999, "unknown error")])
@pytest.mark.parametrize("prefix", ["", "h200-a:2201:2290 [3] transport/nvls.cc:376 NCCL WARN "])
def test_a_failed_nvls_bind_is_the_fabric_manager(tmp_path: Path, code: int, text: str,
                                                   prefix: str) -> None:
    found = top(tmp_path, [*TORCH, *warn(code, text, prefix)])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert f"CUDA error {code} '{text}'" in found.explanation
    assert "nvidia-fabricmanager" in found.fix and "NCCL_NVLS_ENABLE=0" in found.fix


def test_a_wrapped_warn_is_read_by_its_advice(tmp_path: Path) -> None:
    # a post that wrapped NCCL's first line keeps its advice line whole
    lines = ["RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
             "transport/nvls.cc:287 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast",
             "  memory of size 2097152 : CUDA error 401 'the operation cannot be performed'.",
             "Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future."]
    assert top(tmp_path, lines).id == "cuda-error"


def test_nccl_going_on_without_nvls_is_no_failure_of_it(tmp_path: Path) -> None:
    # 2.27 and 2.28: an info line, the run goes on
    lines = ["h200-a:2201:2290 [3] NCCL INFO Failed to bind NVLink SHARP (NVLS) Multicast memory "
             "of size 2097152 : CUDA error 2 'out of memory'. Proceeding without NVLS support.",
             "h200-a:2201:2290 [3] NCCL INFO comm 0x5 rank 3 nranks 8 cudaDev 3 nvmlDev 3 busId "
             "5d000 commId 0x9 - Init COMPLETE"]
    found = top(tmp_path, lines)
    assert found.severity != "error"


def test_the_warns_second_line_alone_is_the_catalogues_cuda_error(tmp_path: Path) -> None:
    # the message catalogue files nvls.cc's WARN under cuda-error (tools/msgrules.py: NCCL's own
    # words lay it on the Fabric Manager or the NVSwitches), not under peer-to-peer
    lines = ["h200-a:2201:2290 [3] transport/nvls.cc:376 NCCL WARN This is usually caused by a "
             "system or configuration error in the Fabric Manager or NVSwitches.",
             "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for "
             "details)"]
    found = top(tmp_path, lines)
    assert found.id == "cuda-error" and "p2p" not in found.explanation
