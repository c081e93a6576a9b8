"""causes/gpu_assert.py: a program's own assertion on the GPUs torch sees, failing. The lines are
CPython's traceback format (Lib/traceback.py: '  File "%s", line %d, in %s', the source line
indented by four, from 3.11 a line of carets under the failing expression, then the exception's
type, here an AssertionError without a message); the source lines are the assert statements such
code writes (YOLOX's tools/train.py: ``assert num_gpu <= get_num_devices()``, earlier ``assert
num_gpu <= torch.cuda.device_count()``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

FRAME = '  File "tools/train.py", line 112, in <module>'


@pytest.mark.parametrize("source", [
    "assert num_gpu <= torch.cuda.device_count()",
    "assert torch.cuda.is_available()",
    "assert torch.cuda.is_available(), 'CUDA is required'",
    "assert args.ngpus <= torch.cuda.device_count(), f'only {torch.cuda.device_count()} GPUs'"])
@pytest.mark.parametrize("carets", [False, True])
@pytest.mark.parametrize("prefix", ["", "[rank0]: "])
def test_a_failed_assert_on_the_gpus_torch_sees_is_a_cuda_error(
        tmp_path: Path, source: str, carets: bool, prefix: str) -> None:
    lines = ["Traceback (most recent call last):", FRAME, "    " + source,
             *(["    " + "^" * len(source)] if carets else []), "AssertionError"]
    found = top(tmp_path, [prefix + line for line in lines])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert source in found.explanation
    assert "torch.cuda.device_count()" in found.fix


def test_an_assert_on_something_else_is_not_this(tmp_path: Path) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):", FRAME,
                           "    assert len(dataset) > 0", "AssertionError"])
    assert found.id != "cuda-error"


def test_the_gpu_assert_passing_and_another_error_later_is_not_this(tmp_path: Path) -> None:
    # (the source line printed by an earlier warning's traceback; the failure comes later)
    found = top(tmp_path, ["    assert num_gpu <= torch.cuda.device_count()",
                           *(f"epoch 0 step {step} loss 2.3" for step in range(6)),
                           "Traceback (most recent call last):", FRAME, "    x = batch['label']",
                           "AssertionError"])
    assert found.id != "cuda-error"
