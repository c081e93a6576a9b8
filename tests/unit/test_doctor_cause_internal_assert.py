"""causes/internal_assert.py: torch.distributed's own consistency check failing is internal-error.

Source of the line: c10/util/Exception.cpp (torch 1.x to 2.x), ``TORCH_INTERNAL_ASSERT``'s
message ``"%s INTERNAL ASSERT FAILED at %s:%d, please report a bug to PyTorch. %s"``, the file as
``__FILE__`` names it (quoted from torch 1.6 on); raised to Python as a RuntimeError. The checks
named below are the reducer's and ProcessGroupNCCL's own (torch/csrc/distributed/c10d/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACEBACK = ["Traceback (most recent call last):",
             '  File "train.py", line 40, in <module>',
             "    loss.backward()"]


@pytest.mark.parametrize("where", [
    '"/pytorch/torch/csrc/distributed/c10d/reducer.cpp":1326',
    "/opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:912",
    '"../torch/csrc/distributed/c10d/reducer.cpp":2157',
])
@pytest.mark.parametrize("head", ["RuntimeError: ", "[rank1]: RuntimeError: "])
def test_a_c10d_internal_assert_is_internal_error(tmp_path: Path, where: str, head: str) -> None:
    found = top(tmp_path, [*TRACEBACK, f"{head}replicas_[0].size() == rebuilt_params_.size() "
                           f"INTERNAL ASSERT FAILED at {where}, please report a bug to "
                           "PyTorch. rebuilt parameter indices size is not same as original "
                           "model parameters size.7 versus 9"])
    assert (found.id, found.severity) == ("internal-error", "error")
    assert "c10d" in found.explanation and "torch build" in found.fix


def test_an_assert_outside_torch_distributed_is_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACEBACK, 'RuntimeError: t.numel() > 0 INTERNAL ASSERT FAILED at '
                           '"../aten/src/ATen/native/TensorShape.cpp":42, please report a bug '
                           "to PyTorch. "])
    assert found.id != "internal-error"


def test_an_out_of_memory_before_it_says_more(tmp_path: Path) -> None:
    found = top(tmp_path, ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                           "GiB", *TRACEBACK, 'RuntimeError: ok INTERNAL ASSERT FAILED at '
                           '"/pytorch/torch/csrc/distributed/c10d/reducer.cpp":7, please report '
                           "a bug to PyTorch. "])
    assert found.id == "out-of-memory"
