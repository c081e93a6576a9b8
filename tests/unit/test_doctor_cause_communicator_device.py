"""causes/communicator_device.py: a tensor handed to an NCCL communicator bound to another GPU
is invalid-usage. Source of the lines: vLLM v0.6 vllm/distributed/device_communicators/
pynccl.py, PyNcclCommunicator.all_reduce (and its other collectives): ``assert tensor.device ==
self.device, (f"this nccl communicator is created to work on {self.device}, " f"but the input
tensor is on {tensor.device}")``, which a traceback posts after "AssertionError:" on one line or
on its own lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

ASSERTION = ("this nccl communicator is created to work on {bound}, but the input tensor is on "
             "{given}")
FRAME = ('  File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/'
         'pynccl.py", line 121, in all_reduce')


@pytest.mark.parametrize(("bound", "given"), [("cuda:1", "cuda:0"), ("cuda:0", "cuda:7")])
def test_a_tensor_on_another_gpu_is_invalid_usage(tmp_path: Path, bound: str,
                                                  given: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):", FRAME,
                           "    assert tensor.device == self.device, (",
                           "AssertionError: " + ASSERTION.format(bound=bound, given=given)])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert bound in found.explanation and given in found.explanation
    assert "set_device" in found.fix


def test_the_message_on_lines_of_its_own(tmp_path: Path) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):", FRAME, "AssertionError:",
                           "this nccl communicator is created to work on cuda:1,",
                           "but the input tensor is on cuda:0"])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert "cuda:1" in found.explanation
