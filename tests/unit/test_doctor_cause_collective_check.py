"""causes/collective_check.py: torch's C++ check refusing a collective's or DDP's arguments, raised
as a RuntimeError through the Python wrapper, is invalid-usage; a failure of the network, a peer,
CUDA, memory or time raised there is not. Lines made from torch v2.3.0's checks
(ProcessGroupNCCL.cpp, check_gpu_tensors_same_device / check_gpu_single_tensor: "Tensors must be
CUDA and dense", "All tensor operands to scatter/gather must have the same number of
dimensions", "Input tensor sequence should have the same number of tensors as the output tensor
sequence"; comm.cpp / reducer.cpp, _verify_param_shape_across_processes: "DDP expects same model
across all ranks, but Rank {} has {} params, while rank {} has inconsistent {} params.";
ProcessGroupNCCL.cpp getNcclReduceOp: "Cannot use ReduceOp.{} with NCCL") and CPython's traceback
(Lib/traceback.py: '  File "%s", line %d, in %s'), its frames those of torch's wrappers
(distributed_c10d.py all_gather, nn/parallel/distributed.py __init__)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.diagnose import diagnose

SITE = "/opt/conda/lib/python3.10/site-packages/torch"
GATHER = ["Traceback (most recent call last):", '  File "/home/u/train.py", line 40, in <module>',
          "    dist.all_gather(out, x)",
          f'  File "{SITE}/distributed/distributed_c10d.py", line 3144, in all_gather',
          "    work = default_pg.allgather([tensor_list], [tensor])"]
DDP = ["Traceback (most recent call last):", '  File "train.py", line 22, in <module>',
       "    model = DDP(model, device_ids=[local_rank])",
       f'  File "{SITE}/nn/parallel/distributed.py", line 795, in __init__',
       "    _verify_param_shape_across_processes(self.process_group, parameters)",
       f'  File "{SITE}/distributed/utils.py", line 269, in _verify_param_shape_across_processes',
       "    return dist._verify_params_across_processes(process_group, tensors, logger)"]
DDP_WRAPPER = DDP[:5]


@pytest.mark.parametrize(("frames", "message"), [
    (GATHER, "All tensor operands to scatter/gather must have the same number of dimensions"),
    (GATHER, "Input tensor sequence should have the same number of tensors as the output tensor "
             "sequence"),
    (GATHER, "Cannot use ReduceOp.AVG with NCCL"),
    (DDP_WRAPPER, "DDP expects same model across all ranks, but Rank 1 has 120 params, while "
                  "rank 0 has inconsistent 118 params."),
])
def test_a_refused_call_is_invalid_usage(tmp_path: Path, frames: list[str], message: str) -> None:
    found = top(tmp_path, [*frames, f"RuntimeError: {message}"])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert message[:40] in found.explanation
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in found.fix


@pytest.mark.parametrize("message", [
    "Connection reset by peer",
    "Socket Timeout",
    "CUDA error: an illegal memory access was encountered",
    "NCCL communicator was aborted on rank 1.",
    "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
    "[10.0.0.2]:23456",
])
def test_a_failure_raised_there_is_not_a_refusal(tmp_path: Path, message: str) -> None:
    found = top(tmp_path, [*GATHER, f"RuntimeError: {message}"])
    assert found.id != "invalid-usage"


def test_the_same_words_raised_in_the_script_are_not_torch_s_check(tmp_path: Path) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "/home/u/train.py", line 40, in <module>',
                           '    raise RuntimeError("Input tensor sequence should have the same")',
                           "RuntimeError: Input tensor sequence should have the same"])
    assert found.id != "invalid-usage"


def test_two_causes_of_one_id_give_one_finding(tmp_path: Path) -> None:
    # causes/no_backend.py and this one both read a CPU tensor given to an NCCL group
    log = _log(tmp_path, [*GATHER, "RuntimeError: No backend type associated with device type cpu"])
    findings = [f.id for f in diagnose([str(log)])]
    assert findings.count("invalid-usage") == 1


def _log(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    return path
