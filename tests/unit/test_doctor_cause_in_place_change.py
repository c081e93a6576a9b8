"""causes/in_place_change.py: autograd's check that a tensor saved for the backward pass was not
changed in place, read by what its line shows. Source of the lines: torch v2.4.0,
torch/csrc/autograd/saved_variable.cpp, SavedVariable::unpack:

    message << "one of the variables needed for gradient computation has been "
        "modified by an inplace operation: [" << data_.toString() << " " << data_.sizes() << "]";
    if (grad_fn) message << ", which is output " << output_nr_ << " of " << grad_fn->name() << ",";
    message << " is at version " << current_version << "; expected version " << saved_version_
        << " instead.";

then one of two hints: " Hint: enable anomaly detection to find the operation that failed to
compute its gradient, with torch.autograd.set_detect_anomaly(True)." or, under anomaly mode, "
Hint: the backtrace further above shows the operation that failed to compute its gradient. The
variable in question was changed in there or anywhere later. Good luck!". data_.toString() is
the legacy type name (torch.cuda.FloatTensor, torch.FloatTensor, torch.cuda.HalfTensor);
sizes print as an IntArrayRef, "[64]", "[160, 128]".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

HINTS = [" Hint: enable anomaly detection to find the operation that failed to compute its "
         "gradient, with torch.autograd.set_detect_anomaly(True).",
         " Hint: the backtrace further above shows the operation that failed to compute its "
         "gradient. The variable in question was changed in there or anywhere later. Good luck!"]
TRACE = ["Traceback (most recent call last):", '  File "train_gan.py", line 212, in <module>',
         "    loss_d.backward()"]


def message(type_name: str, sizes: str, grad_fn: str | None, version: int, hint: str) -> str:
    output = f", which is output 0 of {grad_fn}," if grad_fn else ""
    return ("RuntimeError: one of the variables needed for gradient computation has been "
            f"modified by an inplace operation: [{type_name} [{sizes}]]{output} is at version "
            f"{version}; expected version {version - 1} instead.{hint}")


@pytest.mark.parametrize("hint", HINTS)
@pytest.mark.parametrize("type_name", ["torch.cuda.FloatTensor", "torch.FloatTensor",
                                       "torch.cuda.HalfTensor"])
@pytest.mark.parametrize("sizes", ["64", "2048"])
def test_a_changed_buffer_of_one_dimension_names_ddps_buffer_broadcast(
        tmp_path: Path, hint: str, type_name: str, sizes: str) -> None:
    found = top(tmp_path, [*TRACE, message(type_name, sizes, None, 4, hint)])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert f"[{sizes}]" in found.explanation and "BatchNorm" in found.explanation
    assert "broadcast_buffers=False" in found.fix


@pytest.mark.parametrize("sizes", ["160, 128", "64, 3, 7, 7"])
def test_a_changed_weight_names_the_optimizer_step(tmp_path: Path, sizes: str) -> None:
    found = top(tmp_path, [*TRACE, message("torch.cuda.FloatTensor", sizes, None, 2, HINTS[0])])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert f"[{sizes}]" in found.explanation and "optimizer.step()" in found.explanation
    assert "BatchNorm" not in found.explanation
    assert "broadcast_buffers" not in found.fix


@pytest.mark.parametrize("grad_fn", ["ReluBackward0", "AsStridedBackward0", "SigmoidBackward"])
@pytest.mark.parametrize("sizes", ["64", "50, 300, 64"])
def test_a_changed_result_names_the_operation_that_made_it(tmp_path: Path, grad_fn: str,
                                                            sizes: str) -> None:
    # (a grad_fn named: not a parameter or buffer, whatever its shape)
    found = top(tmp_path, [*TRACE, message("torch.FloatTensor", sizes, grad_fn, 1, HINTS[1])])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert grad_fn in found.explanation and "BatchNorm" not in found.explanation
    assert "inplace=False" in found.fix


def test_the_line_with_a_ranks_prefix_and_an_opening_bracket_lost(tmp_path: Path) -> None:
    # (torchrun's tee prefix; a post that lost the first "[" of the tensor's description)
    line = message("torch.cuda.FloatTensor", "65", None, 3, HINTS[1]).replace(
        "operation: [torch", "operation: torch")
    found = top(tmp_path, ["[default1]:" + line])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert "[65]" in found.explanation


def test_another_runtime_error_is_not_an_in_place_change(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "RuntimeError: Trying to backward through the graph a second "
                                   "time (or directly access saved tensors after they have "
                                   "already been freed)."])
    assert "Autograd found" not in found.explanation
