"""causes/gpu_build.py: torch saying its CUDA build does not fit the GPU or the driver is
version-mismatch, an error once something fails and a warning while nothing does. Sources of
the lines:

- torch v2.13.0 torch/cuda/__init__.py, ``_check_cubins``' incompatible_device_warn ("{} with CUDA
  capability sm_{} is not compatible with the current PyTorch installation.\\nThe current PyTorch
  install supports CUDA capabilities {}.\\nIf you want to use the {} GPU with PyTorch, please check
  the instructions at https://pytorch.org/get-started/locally/"), and ``_warn_unsupported_code``
  ("Found GPU{} {} which is of compute capability (CC) {}.{}.", "The following list shows the CCs
  this version of PyTorch was built for ...", "Your installed torch=={} does not include kernels
  for this GPU. ...", read at its last line)
- torch 1.x torch/cuda/__init__.py, ``_check_capability``' old_gpu_warn ("Found GPU%d %s which is
  of cuda capability %d.%d.\\n PyTorch no longer supports this GPU because it is too old.\\n The
  minimum cuda capability supported by this library is %d.%d.") and incorrect_binary_warn
  ("Found GPU%d %s which requires CUDA_VERSION >= %d to\\n work properly, but your PyTorch was
  compiled\\n with CUDA_VERSION %d. ...")
- c10/cuda/CUDAFunctions.cpp, device_count_impl on cudaErrorInsufficientDriver: "The NVIDIA
  driver on your system is too old (found version %d). Please update your GPU driver ...", which
  torch/cuda/__init__.py warns as "CUDA initialization: %s"
- the failures that follow: CUDA's cudaGetErrorString of cudaErrorNoKernelImageForDevice through
  torch's "CUDA error: %s"; torch v2.x ProcessGroupNCCL.cpp "ProcessGroupNCCL is only supported with
  GPUs, no GPUs found!"; torchelastic's "failed (exitcode: %d) local_rank: %d (pid: %d) of binary:"
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

WARN_AT = "/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:235: UserWarning: "
CUBINS = [WARN_AT, "{name} with CUDA capability {sm} is not compatible with the current PyTorch "
          "installation.", "The current PyTorch install supports CUDA capabilities sm_50 sm_60 "
          "sm_70 sm_75 sm_80 sm_86 sm_90.", "If you want to use the {name} GPU with PyTorch, "
          "please check the instructions at https://pytorch.org/get-started/locally/", ""]
NEWEST = [WARN_AT + "Found GPU0 {name} which is of compute capability (CC) 12.0.",
          "The following list shows the CCs this version of PyTorch was built for and the hardware"
          " CCs it supports:", "- 8.0 which supports hardware CC >=8.0,<9.0",
          "Your installed torch==2.6.0+cu124 does not include kernels for this GPU. Reinstall the "
          "same version against a CUDA build that does, e.g.:"]
OLD_GPU = [WARN_AT, "    Found GPU0 Tesla K80 which is of cuda capability 3.7.",
           "    PyTorch no longer supports this GPU because it is too old.",
           "    The minimum cuda capability supported by this library is 5.0."]
NEEDS_CUDA = [WARN_AT, "    Found GPU0 NVIDIA GeForce RTX 3090 which requires CUDA_VERSION >= 11000 "
              "to", "     work properly, but your PyTorch was compiled", "     with CUDA_VERSION "
              "10020. Please install the correct PyTorch binary"]
DRIVER = [WARN_AT + "CUDA initialization: The NVIDIA driver on your system is too old (found "
          "version {version}). Please update your GPU driver by downloading and installing a new "
          "version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
          "https://pytorch.org to install a PyTorch version that has been compiled with your "
          "version of the CUDA driver. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)",
          "  return torch._C._cuda_getDeviceCount() > 0"]
TRACE = ["Traceback (most recent call last):", '  File "train.py", line 30, in <module>',
         "    main()"]
FAILED = ["[2025-03-01 10:00:01,000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
          "(exitcode: 1) local_rank: 0 (pid: 812) of binary: /opt/conda/bin/python"]


def _lines(block: list[str], **values: str) -> list[str]:
    return [line.format(**values) for line in block]


@pytest.mark.parametrize(("warning", "failure", "word"), [
    (_lines(CUBINS, name="NVIDIA GeForce RTX 5090", sm="sm_120"),
     "RuntimeError: CUDA error: no kernel image is available for execution on the device",
     "sm_120"),
    (_lines(NEWEST, name="NVIDIA B200"), "RuntimeError: CUDA error: an illegal memory access was "
     "encountered", "has no GPU code"),
    (OLD_GPU, "RuntimeError: CUDA error: no kernel image is available for execution on the device",
     "older than this torch build"),
    (NEEDS_CUDA, "RuntimeError: CUDA error: no kernel image is available for execution on the "
     "device", "has no GPU code"),
    (_lines(DRIVER, version="11040"), "RuntimeError: ProcessGroupNCCL is only supported with GPUs, "
     "no GPUs found!", "CUDA 11.4"),
    (_lines(DRIVER, version="12020"), "RuntimeError: Found no NVIDIA driver on your system. Please "
     "check that you have an NVIDIA GPU and installed a driver from "
     "http://www.nvidia.com/Download/index.aspx", "CUDA 12.2"),
])
def test_a_build_that_does_not_fit_explains_the_failure(tmp_path: Path, warning: list[str],
                                                        failure: str, word: str) -> None:
    found = top(tmp_path, [*warning, *TRACE, failure, *FAILED])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert word in found.explanation
    assert "pip install torch" in found.fix or "older torch release" in found.fix


def test_the_warning_alone_is_a_warning(tmp_path: Path) -> None:
    warning = _lines(CUBINS, name="NVIDIA GeForce RTX 3090", sm="sm_86")
    found = top(tmp_path, [*warning, "epoch 0 step 10 loss 2.31"])
    assert (found.id, found.severity) == ("version-mismatch", "warning")
    assert "sm_86" in found.explanation


def test_no_kernel_image_alone_is_the_build_not_fitting(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "RuntimeError: CUDA error: no kernel image is available for "
                                   "execution on the device", *FAILED])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "get_arch_list" in found.fix


@pytest.mark.parametrize("line", [
    "Found GPU0 NVIDIA A100-SXM4-80GB, using it for training with PyTorch 2.4",
    "PyTorch 2.4.0 with CUDA 12.4 on NVIDIA driver 550.54.15",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [node1]:29500",
])
def test_a_gpu_or_driver_named_in_passing_is_not_this_cause(tmp_path: Path, line: str) -> None:
    assert top(tmp_path, [line, *TRACE, "RuntimeError: boom", *FAILED]).id != "version-mismatch"
