"""causes/ddp_optimizer.py: torch.compile's DDP optimizer (the backend Dynamo calls a DDP model's
graphs with, DDPOptimizer.compile_fn) raising is torch's own compiler failing: internal-error,
with the switch that turns the splitting off. Sources of the lines:

- torch v2.1.2 to v2.13.0 torch/_dynamo/exc.py, BackendCompilerFailed:
  ``f"backend={self.backend_name!r} raised:\\n{type(inner_exception).__name__}: {inner_exception}"``
- torch v2.0.1 torch/_dynamo/exc.py: ``f"{self.backend_name} raised {type(inner_exception).__name__}:
  {inner_exception}"``
- torch v2.0.1 torch/_dynamo/eval_frame.py and v2.13.0 convert_frame.py: with
  ``config.optimize_ddp`` on, the backend is ``ddp_optimizer.compile_fn``
- torch v2.3.0 c10/cuda/CUDACachingAllocator.cpp: ``CUDA out of memory. Tried to allocate %s``
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

V21 = "torch._dynamo.exc.BackendCompilerFailed: backend={name!r} raised:"
V20 = "torch._dynamo.exc.BackendCompilerFailed: {name} raised {kind}: {message}"
INNER = "{kind}: {message}"
KINDS = [("AttributeError", "'Linear' object has no attribute 'requires_grad'"),
         ("AssertionError", ""), ("RuntimeError", "Expected all tensors to be on the same device")]


@pytest.mark.parametrize(("kind", "message"), KINDS)
@pytest.mark.parametrize("bare", [False, True])
def test_the_ddp_optimizer_raising_is_an_internal_error(tmp_path: Path, kind: str, message: str,
                                                         bare: bool) -> None:
    head = V21.format(name="compile_fn")
    if bare:  # posted without the exception's class
        head = head.split(": ", 1)[1]
    found = top(tmp_path, ["Epoch 0:   0%|          | 0/100", head,
                           INNER.format(kind=kind, message=message)])
    assert (found.id, found.severity) == ("internal-error", "error")
    assert "torch._dynamo.config.optimize_ddp = False" in found.fix
    assert [e.line for e in found.evidence][:1] == [2]


def test_torch_2_0_s_form_is_read_too(tmp_path: Path) -> None:
    found = top(tmp_path, [V20.format(name="compile_fn", kind="AttributeError",
                                      message="'Linear' object has no attribute 'weight'")])
    assert found.id == "internal-error" and "optimize_ddp" in found.fix


@pytest.mark.parametrize("name", ["inductor", "my_backend", "aot_eager"])
def test_another_backend_s_failure_is_not_named(tmp_path: Path, name: str) -> None:
    found = top(tmp_path, [V21.format(name=name),
                           INNER.format(kind="RuntimeError", message="Triton compile failed")])
    assert found.id != "internal-error"
    assert "optimize_ddp" not in found.fix


def test_memory_that_ran_out_while_compiling_ranks_first(tmp_path: Path) -> None:
    found = top(tmp_path, [V21.format(name="compile_fn"),
                           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                           "GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is "
                           "free."])
    assert found.id == "out-of-memory"
