"""causes/no_gpu.py: a process that finds no GPU to use is cuda-error, with its reason. Sources of
the lines:

- torch v2.3.0 torch/cuda/__init__.py, _lazy_init: ``raise AssertionError("Torch not compiled
  with CUDA enabled")``; torch._C._cuda_init's "Found no NVIDIA driver on your system. Please
  check that you have an NVIDIA GPU and installed a driver from
  http://www.nvidia.com/Download/index.aspx" and "CUDA driver initialization failed, you might
  not have a CUDA gpu."
- torch v2.3.0 c10/cuda/CUDAFunctions.cpp, device_count_ensure_non_zero: "No CUDA GPUs are
  available"; a ROCm build's hipified copy of it: "No HIP GPUs are available" (ROCm's GPU
  isolation documentation: ROCR_VISIBLE_DEVICES first, HIP/CUDA_VISIBLE_DEVICES within it)
- DeepSpeed v0.9 deepspeed/launcher/runner.py, main: ``raise RuntimeError("Unable to proceed, no
  GPU resources available")``
- Slurm's gres plugins (src/plugins/gres/common/gres_common.c): CUDA_VISIBLE_DEVICES=NoDevFiles for
  a step whose gres has no device files, as a program parsing it fails: CPython's int() "invalid
  literal for int() with base 10: %R"
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACE = ["Traceback (most recent call last):", '  File "train.py", line 20, in <module>',
         "    model.cuda()"]


@pytest.mark.parametrize(("line", "fix_word"), [
    ("AssertionError: Torch not compiled with CUDA enabled", "torch.version.cuda"),
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
     "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx", "--gpus all"),
    ("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
     "nvidia-smi"),
    ("RuntimeError: No CUDA GPUs are available", "CUDA_VISIBLE_DEVICES"),
    ("RuntimeError: No HIP GPUs are available", "ROCR_VISIBLE_DEVICES"),
    ("RuntimeError: Unable to proceed, no GPU resources available", "CUDA_VISIBLE_DEVICES"),
    ("ValueError: invalid literal for int() with base 10: 'NoDevFiles'", "gres.conf"),
    ("[rank0]: ValueError: invalid literal for int() with base 10: 'NoDevFiles'", "gres.conf"),
    # a CPU build's torch._C has no CUDA bindings (torch/csrc/cuda/Module.cpp is compiled in
    # only with CUDA), and torch 2.x's torch.cuda.set_device calls one before any check (CPython's
    # "module %R has no attribute %R"; torchrun's tee tag, as tests/fixtures/logs/torchrun-cpu/
    # cuda shows it)
    ("[default0]:AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'",
     "torch.version.cuda"),
    ("AttributeError: module 'torch._C' has no attribute '_cuda_getDeviceCount'",
     "torch.version.cuda"),
])
def test_no_gpu_to_use_is_a_cuda_error(tmp_path: Path, line: str, fix_word: str) -> None:
    found = top(tmp_path, [*TRACE, line])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert fix_word in found.fix


def test_another_missing_torch_name_is_another_release_not_a_cpu_build(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "AttributeError: module 'torch.distributed' has no attribute "
                                   "'_all_gather_base'"])
    assert found.id == "version-mismatch" and "CPU-only" not in found.explanation


def test_a_gpu_named_in_passing_is_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["Using GPU 0 for training", "epoch 1 loss 0.3 (8 GPUs available)"])
    assert found.id != "cuda-error"
