"""causes/cuda_meaning.py: a CUDA error whose documented meaning names the cause, read by
cudaGetErrorString()'s text in any check macro's line. Sources of the lines:

- CUDA 12 runtime API, driver_types.h (cudaError): cudaErrorTooManyPeers (711) "peer mapping
  resources exhausted", cudaErrorSystemDriverMismatch (803) "system has unsupported display
  driver / cuda driver combination", cudaErrorCompatNotSupportedOnDevice (804) "forward
  compatibility was attempted on non supported HW", cudaErrorUnsupportedPtxVersion (222) "the
  provided PTX was compiled with an unsupported toolchain.", cudaErrorNoKernelImageForDevice
  (209), cudaErrorNoDevice (100), cudaErrorDevicesUnavailable (46), cudaErrorSystemNotReady
  (802) "system not yet initialized", cudaErrorInvalidDeviceFunction (98) "invalid device
  function" ("not compiled for the proper device architecture"), cudaErrorECCUncorrectable
  (214), cudaErrorIllegalAddress (700), cudaErrorAssert (710) "device-side assert triggered"
- CUDA C++ Programming Guide, Peer-to-Peer Memory Access: at most eight peer connections per
  device
- CUDA driver API, cuGetErrorString: CUDA_ERROR_ILLEGAL_STATE (401) "the operation cannot be
  performed in the present state"; NCCL v2.27 src/transport/nvls.cc: "Failed to bind NVLink SHARP
  (NVLS) Multicast memory of size %zu : CUDA error %d '%s'", after torch's "Last error:"
- NCCL v2.18 src/include/checks.h, CUDACHECK: ``WARN("Cuda failure %d '%s'", ...)`` and return
  ncclUnhandledCudaError
- torch v0.4 aten/src/THC/THCGeneral.cpp, __THCudaCheck: ``"cuda runtime error (%d) : %s at
  %s:%d"`` (the runtime's error number and cudaGetErrorString's text)
- torch v2.3.0 c10/cuda/CUDAException.cpp: ``CUDA error: %s``; NCCL v2.18 src/include/checks.h
  CUDACHECK: ``Cuda failure '%s'``; vLLM v0.4.3 csrc/custom_all_reduce.cuh: ``Failed: Cuda error
  %s:%d '%s'``
- torch v2.0 c10/cuda/CUDAFunctions.cpp device_count_impl: ``"Unexpected error from
  cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that
  might have already set an error? Error ", err, ": ", cudaGetErrorString(err)``, which
  torch/cuda/__init__.py warns with: ``warnings.warn("CUDA initialization: " + msg)``
- torch v2.3.0 aten/src/ATen/cudnn/Exceptions.h, AT_CUDNN_CHECK: ``"cuDNN error: ",
  cudnnGetErrorString(status)``; aten/src/ATen/cuda/CUDABlas.h, TORCH_CUDABLAS_CHECK: ``"CUDA
  error: ", cublasGetErrorString(status), " when calling `" #EXPR "`"``; the statuses' meanings:
  the cuDNN API reference (cudnnStatus_t) and the cuBLAS library guide (cublasStatus_t)
- ROCm: torch's checks in a ROCm build (c10/hip, hipified from c10/cuda): ``HIP error: %s``;
  the HIP runtime (ROCm clr, hipamd/src/hip_code_object.cpp): ``hipErrorNoBinaryForGpu: Unable
  to find code object for all current devices!``, which AMD's ROCm documentation (deep learning
  troubleshooting) reads as a PyTorch build that does not support the current GPU
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TORCH = "RuntimeError: CUDA error: {text}"
NCCL = "node1:1234:1240 [0] include/alloc.h:48 NCCL WARN Cuda failure '{text}'"
VLLM = "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 '{text}'"
THC = "RuntimeError: cuda runtime error (60) : {text} at /opt/conda/torch/lib/THC/THCGeneral.c:224"
# a CUDA extension's own check, no check macro's words: its printf of cudaGetErrorString
# (InternImage's DCNv3 op, ops_dcnv3/src/cuda/dcnv3_im2col_cuda.cuh: "error in
# dcnv3_im2col_cuda: %s\n"), which real logs post repeated, with nothing after
OWN = "error in dcnv3_im2col_cuda: {text}"
FOLLOW = ("CUDA kernel errors might be asynchronously reported at some other API call, so the "
          "stacktrace below might be incorrect.")


@pytest.mark.parametrize("template", [TORCH, NCCL, VLLM, THC])
@pytest.mark.parametrize(("text", "expected", "word"), [
    ("peer mapping resources exhausted", "p2p", "NCCL_P2P_DISABLE=1"),
    ("system has unsupported display driver / cuda driver combination", "version-mismatch",
     "nvidia-smi"),
    ("forward compatibility was attempted on non supported HW", "version-mismatch", "cuda-compat"),
    ("the provided PTX was compiled with an unsupported toolchain.", "version-mismatch",
     "torch.version.cuda"),
    ("no kernel image is available for execution on the device", "version-mismatch",
     "get_arch_list"),
    ("invalid device function", "version-mismatch", "get_arch_list"),
    ("no CUDA-capable device is detected", "cuda-error", "CUDA_VISIBLE_DEVICES"),
    ("CUDA-capable device(s) is/are busy or unavailable", "cuda-error", "COMPUTE"),
    ("system not yet initialized", "cuda-error", "nvidia-fabricmanager"),
    ("uncorrectable ECC error encountered", "cuda-error", "ECC"),
    ("an illegal memory access was encountered", "cuda-error", "CUDA_LAUNCH_BLOCKING=1"),
    ("device-side assert triggered", "cuda-error", "labels"),
])
def test_the_error_s_meaning_names_the_cause(tmp_path: Path, template: str, text: str,
                                             expected: str, word: str) -> None:
    found = top(tmp_path, ["[rank1]: Traceback (most recent call last):",
                           template.format(text=text), FOLLOW])
    assert (found.id, found.severity) == (expected, "error")
    assert word in found.fix
    assert any(text.rstrip(".") in e.text for e in found.evidence)


@pytest.mark.parametrize(("text", "expected"), [
    ("peer mapping resources exhausted", "p2p"),
    ("the provided PTX was compiled with an unsupported toolchain.", "version-mismatch"),
    ("no kernel image is available for execution on the device", "version-mismatch"),
    ("CUDA-capable device(s) is/are busy or unavailable", "cuda-error"),
    ("uncorrectable ECC error encountered", "cuda-error"),
])
def test_a_cuda_error_s_own_text_is_read_whatever_check_printed_it(
        tmp_path: Path, text: str, expected: str) -> None:
    # cudaGetErrorString's longer texts say which error it is in any line, as the only lines a
    # log holds (a short one, "invalid device function", needs a check macro's words around it)
    found = top(tmp_path, [OWN.format(text=text)] * 4)
    assert (found.id, found.severity) == (expected, "error")
    short = top(tmp_path, [OWN.format(text="invalid device function")] * 4)
    assert short.id != "version-mismatch"


@pytest.mark.parametrize(("line", "expected", "word"), [
    ("RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED", "out-of-memory", "batch"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
     "out-of-memory", "nvidia-smi"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_ARCH_MISMATCH", "version-mismatch", "get_arch_list"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", "cuda-error", "set_device"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
     "cuda-error", "set_device"),
    ("[rank3]: RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED", "cuda-error",
     "CUDA_LAUNCH_BLOCKING=1"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, "
     "opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`", "cuda-error",
     "CUDA_LAUNCH_BLOCKING=1"),
])
def test_a_cuda_library_s_status_names_the_cause(tmp_path: Path, line: str, expected: str,
                                                 word: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "train.py", line 40, in <module>', "    out = model(x)", line])
    assert (found.id, found.severity) == (expected, "error")
    assert word in found.fix
    assert line.split(": ", 2)[-1][:30] in found.explanation + found.evidence[0].text


def test_a_status_named_in_passing_is_not_read(tmp_path: Path) -> None:
    found = top(tmp_path, ["checking CUDNN_STATUS_ALLOC_FAILED handling: ok",
                           "ERROR count: 0 (CUDNN_STATUS_MAPPING_ERROR tested)", "epoch 1 done"])
    assert found.id not in ("out-of-memory", "cuda-error")


def test_the_first_error_names_it_when_others_follow(tmp_path: Path) -> None:
    found = top(tmp_path, [TORCH.format(text="peer mapping resources exhausted"),
                           TORCH.format(text="an illegal memory access was encountered")])
    assert found.id == "p2p"


def test_the_words_alone_outside_a_check_line_are_not_read(tmp_path: Path) -> None:
    # a script's own print of the same words: no check macro printed it
    found = top(tmp_path, ["epoch 1: misaligned address count 0",
                           "note: system not yet initialized, waiting"])
    assert found.id not in ("cuda-error", "p2p", "version-mismatch")


def test_nvls_binding_in_an_illegal_state_is_the_fabric_manager_s(tmp_path: Path) -> None:
    found = top(tmp_path, [
        "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:93, unhandled cuda "
        "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3",
        "ncclUnhandledCudaError: Call to CUDA function failed.", "Last error:",
        "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 "
        "'the operation cannot be performed in the present state'"])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert "NCCL_NVLS_ENABLE=0" in found.fix and "nvidia-fabricmanager" in found.fix


def test_an_nccl_warn_cuda_failure_of_another_error_is_a_cuda_error(tmp_path: Path) -> None:
    # NCCL's CUDACHECK returned ncclUnhandledCudaError; CUDA's "unknown error" names no cause
    found = top(tmp_path, ["gpu47:4962:5097 [1] transport/nvls.cc:223 NCCL WARN Cuda failure 999 "
                           "'unknown error'"])
    assert (found.id, found.severity) == ("cuda-error", "error")


def test_torchs_warning_of_a_failed_cuda_initialization_is_read(tmp_path: Path) -> None:
    found = top(tmp_path, [
        "/opt/conda/lib/python3.9/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA "
        "initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? Error "
        "802: system not yet initialized (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:"
        "109.)", "  return torch._C._cuda_getDeviceCount() > 0"])
    assert found.id == "cuda-error" and "Fabric Manager" in found.explanation
    assert found.severity == "warning"  # a warning's line alone: nothing shown to fail


@pytest.mark.parametrize("lines", [
    ['"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"',
     "Aborted (core dumped)"],
    [":1:hip_code_object.cpp      :460 : 1885938529 us: hipErrorNoBinaryForGpu: Unable to find "
     "code object for all current devices!", ":1:hip_code_object.cpp      :462 : 1885938540 us:"
     "   Devices:"],
    ["Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
     "    model.cuda()", "RuntimeError: HIP error: invalid device function",
     "HIP kernel errors might be asynchronously reported at some other API call, so the "
     "stacktrace below might be incorrect."],
])
def test_a_rocm_build_without_code_for_the_gpu_is_the_build_s(tmp_path: Path,
                                                              lines: list[str]) -> None:
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "get_arch_list" in found.fix


def test_hip_s_error_names_in_passing_are_not_read(tmp_path: Path) -> None:
    found = top(tmp_path, ["checking hipErrorNoBinaryForGpu handling: ok", "epoch 1 done"])
    assert found.id != "version-mismatch"
