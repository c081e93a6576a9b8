"""causes/parallel_layout.py: a process count the model's parallel layout does not fit is
rank-assignment. Lines made from Megatron-LM's megatron/core/parallel_state.py
(initialize_model_parallel: ``RuntimeError(f"world_size ({world_size}) is not divisible by
tensor_model_parallel_size ({t}) x pipeline_model_parallel_size ({p})")``, later with `` x
context_parallel_size ({c})``; Megatron-DeepSpeed's with `` x sequence_parallel_size ({s})``) and
TensorRT-LLM's cpp/tensorrt_llm/runtime/worldConfig.cpp (WorldConfig::mpi: ``TLLM_CHECK(mpiSize
== tp * pp)``, printed "[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (<file>:<line>)";
later ``TLLM_CHECK_WITH_INFO(mpiSize == tp * pp, "MPI size %d != TP size %d * PP size %d", ...)``
and "... * CP Size %d")."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACE = ["Traceback (most recent call last):", '  File "pretrain_gpt.py", line 180, in <module>',
         "    initialize_megatron(extra_args_provider=extra_args_provider)"]
MEGATRON = ("RuntimeError: world_size ({world}) is not divisible by tensor_model_parallel_size ({t}) "
            "x pipeline_model_parallel_size ({p}){extra}")
TRTLLM = ("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: {check} "
          "(/src/cpp/tensorrt_llm/runtime/worldConfig.cpp:{line})")


@pytest.mark.parametrize(("world", "t", "p", "extra", "product"), [
    (6, 4, 1, "", "4 x 1 = 4"), (12, 8, 2, "", "8 x 2 = 16"),
    (8, 2, 2, " x context_parallel_size (3)", "2 x 2 x 3 = 12"),
    (16, 4, 2, " x sequence_parallel_size (3)", "4 x 2 x 3 = 24")])
def test_megatron_s_world_size_check(tmp_path: Path, world: int, t: int, p: int, extra: str,
                                     product: str) -> None:
    found = top(tmp_path, [*TRACE, MEGATRON.format(world=world, t=t, p=p, extra=extra)])
    assert (found.id, found.severity) == ("rank-assignment", "error")
    assert f"started {world} processes" in found.explanation and product in found.explanation
    assert "parallel sizes" in found.fix


@pytest.mark.parametrize(("check", "counted"), [
    ("mpiSize == tp * pp", False), ("MPI size 2 != TP size 4 * PP size 1", True),
    ("MPI size 1 != TP size 2 * PP size 2 * CP Size 1", True)])
def test_tensorrt_llm_s_world_config_check(tmp_path: Path, check: str, counted: bool) -> None:
    found = top(tmp_path, ['  File "run.py", line 386, in main',
                           "    runner = runner_cls.from_dir(**runner_kwargs)",
                           TRTLLM.format(check=check, line=90)])
    assert (found.id, found.severity) == ("rank-assignment", "error")
    assert ("The job started" in found.explanation) is counted
    assert "mpirun -n" in found.fix


def test_a_divisible_world_size_in_prose_is_not_read(tmp_path: Path) -> None:
    found = top(tmp_path, ["> initializing tensor model parallel with size 4",
                           "> world_size (8) is divisible; data parallel size 2", "step 1"])
    assert found.id != "rank-assignment"
