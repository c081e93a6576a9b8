"""causes/device_ordinal.py: CUDA's invalid device ordinal where a rank selects its GPU is a
cuda-error that names more processes per node than GPUs (no two ranks share a GPU: duplicate-gpu
is NCCL's own check). Sources of the lines:

- CUDA runtime API (driver_types.h): cudaErrorInvalidDevice, 101 (10 before CUDA 10.1),
  cudaGetErrorString "invalid device ordinal"
- torch v2.3.0 c10/cuda/CUDAException.cpp: ``CUDA error: %s``; torch/cuda/__init__.py,
  set_device: ``torch._C._cuda_setDevice(device)`` (a traceback's frame and source lines)
- torch v1.1.0/v1.6.0 torch/csrc/cuda/Module.cpp, THCPModule_setDevice:
  ``THCudaCheck(cudaSetDevice(device))``; aten/src/THC/THCGeneral.cpp, __THCudaCheck:
  ``THCudaCheck FAIL file=%s line=%i error=%i : %s`` and the raised "cuda runtime error (%d) :
  %s at %s:%d"
- torch v2.3.0 torch/distributed/run.py's launch: ranks 0..nproc-1 in LOCAL_RANK
- Ascend CANN's acl_base.h: ACL_ERROR_RT_INVALID_DEVICEID = 107001 ("invalid device id"), as
  torch_npu's NPU_CHECK_ERROR prints a call's code ("NPU function error: %s, error code is %d")
  and the runtime's own log its result ("open device %u failed, runtime result = %d.", as a
  vLLM worker's error record carried it in vllm-project/vllm-ascend#167)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

MODERN = ["Traceback (most recent call last):",
          '  File "train.py", line {n}, in <module>',
          "    torch.cuda.set_device({arg})",
          '  File "/usr/lib/python3/site-packages/torch/cuda/__init__.py", line 404, in set_device',
          "    torch._C._cuda_setDevice(device)",
          "{prefix}RuntimeError: CUDA error: invalid device ordinal"]
THC = "THCudaCheck FAIL file=/pytorch/torch/csrc/cuda/Module.cpp line={line} error={code} : " \
      "invalid device ordinal"


@pytest.mark.parametrize("arg", ["args.local_rank", "int(os.environ['LOCAL_RANK'])"])
@pytest.mark.parametrize("n", [42, 289])
def test_set_device_failing_names_more_processes_than_gpus(tmp_path: Path, arg: str, n: int) -> None:
    lines = [line.format(n=n, arg=arg, prefix="") for line in MODERN]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert "Most likely" in found.explanation and "--nproc-per-node" in found.fix


@pytest.mark.parametrize("line,code", [(33, 10), (59, 101)])
def test_torch_1s_check_in_set_device_names_more_processes_than_gpus(tmp_path: Path, line: int,
                                                       code: int) -> None:
    found = top(tmp_path, [THC.format(line=line, code=code)])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert "selecting its GPU" in found.explanation


def test_several_ranks_failing_say_so(tmp_path: Path) -> None:
    lines = [f"[rank{r}]: RuntimeError: CUDA error: invalid device ordinal" for r in (2, 3)]
    found = top(tmp_path, lines)
    assert found.id == "cuda-error" and "more ranks than it has GPUs" in found.explanation


@pytest.mark.parametrize("line", ["RuntimeError: CUDA error: invalid device ordinal",
                                  "runtimeerror: cuda error: invalid device ordinal"])
def test_the_error_alone_is_a_cuda_error_of_that_meaning(tmp_path: Path, line: str) -> None:
    # no selection shown, no sign of several ranks: the ordinal could come from anywhere, so it
    # is a CUDA call that failed, with CUDA's meaning of the error (and never no-failure)
    found = top(tmp_path, [line])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert "cudaErrorInvalidDevice" in found.explanation and "--nproc-per-node" in found.fix


def test_a_negative_ordinal_is_the_local_rank_argument(tmp_path: Path) -> None:
    lines = ["Namespace(local_rank=-1)"] + [
        line.format(n=12, arg="args.local_rank", prefix="") for line in MODERN]
    assert top(tmp_path, lines).id == "local-rank-argument"


@pytest.mark.parametrize("line", [
    "RuntimeError: NPU function error: aclrtSetDevice(device_index), error code is 107001",
    # the runtime's log line under a worker's error-level record (vLLM's logger format,
    # vllm/logger.py: "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s")
    "ERROR 02-26 09:45:37 worker_base.py:572]   open device 1 failed, runtime result = 107001.",
])
def test_ascends_invalid_device_id_names_the_npus_and_their_tools(tmp_path: Path,
                                                                  line: str) -> None:
    found = top(tmp_path, [line])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert "107001" in found.explanation and "NPU" in found.explanation
    assert "npu-smi" in found.fix and "nvidia-smi" not in found.fix


@pytest.mark.parametrize("line", [
    "RuntimeError: NPU function error: aclrtMalloc(ptr, size), error code is 207001",
    "ERROR worker pid=107001 exited with error code 1",  # the number as a process id
])
def test_other_codes_and_numbers_are_no_invalid_device_id(tmp_path: Path, line: str) -> None:
    assert "invalid device id" not in top(tmp_path, [line]).explanation
