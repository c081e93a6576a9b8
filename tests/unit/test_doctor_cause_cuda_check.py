"""causes/cuda_check.py: a CUDA check macro's failure whose error no other cause reads is
cuda-error, quoting the error. Sources of the lines (the check macros' formats, with errors of
cudaGetErrorString that name no cause of their own: cudaErrorInvalidValue "invalid argument",
cudaErrorNotPermitted "operation not permitted", cudaErrorNotSupported "operation not
supported"):

- torch v2.3.0 c10/cuda/CUDAException.cpp: "CUDA error: %s"
- NCCL v2.18 src/include/checks.h, CUDACHECK: "Cuda failure '%s'"
- vLLM v0.4.3 csrc/custom_all_reduce.cuh, CUDACHECK: "Failed: Cuda error %s:%d '%s'"
- TensorRT-LLM cpp/include/tensorrt_llm/common/cudaUtils.h: "CUDA runtime error in %s: %s"
- vLLM csrc/cumem_allocator.cpp, CUDA_CHECK: "[vllm_allocator_adaptor_c] CUDA Error: %s at %s:%d"
  (cuGetErrorString's text; earlier releases without the bracket), raised to Python as a
  RuntimeError in a Ray actor, whose output Ray prints after "(ActorClass pid=N)"
- torch 1.0 THC/THCGeneral.cpp, __THCudaCheck: "THCudaCheck FAIL file=%s line=%i error=%i : %s"
- nccl-tests src/common.h, CUDACHECK: "%s: Test CUDA failure %s:%d '%s'"
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TEMPLATES = ["RuntimeError: CUDA error: {text}",
             "node1:1234:1240 [0] include/alloc.h:48 NCCL WARN Cuda failure '{text}'",
             "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 '{text}'",
             "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMemcpy(ptr, src, n): {text}",
             "[vllm_allocator_adaptor_c] CUDA Error: {text} at /workspace/csrc/cumem_allocator"
             ".cpp:62",
             "(ActorModelRayActor pid=348952) RuntimeError: CUDA Error: {text} at /workspace/csrc/"
             "cumem_allocator.cpp:62",
             "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=383 error=11 : "
             "{text}",
             # nccl-tests v2.13 src/common.h, CUDACHECK: printf("%s: Test CUDA failure %s:%d
             # '%s'\n", hostname, __FILE__, __LINE__, cudaGetErrorString(err))
             "gpu-node-7: Test CUDA failure common.cu:1045 '{text}'"]


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("text", ["invalid argument", "operation not permitted",
                                  "operation not supported"])
def test_a_cuda_call_that_failed_is_a_cuda_error(tmp_path: Path, template: str,
                                                 text: str) -> None:
    found = top(tmp_path, [template.format(text=text)])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert text in found.explanation


@pytest.mark.parametrize(("text", "finding"), [("out of memory", "out-of-memory"),
                                               ("peer mapping resources exhausted", "p2p")])
def test_an_error_with_a_meaning_of_its_own_keeps_its_finding(tmp_path: Path, text: str,
                                                              finding: str) -> None:
    for template in (TEMPLATES[0], TEMPLATES[4], TEMPLATES[5]):
        found = top(tmp_path, [template.format(text=text)])
        assert found.id == finding, template
