"""causes/shared_device.py: processes of one machine on one GPU, as NCCL's line prefixes show it,
in a run whose NCCL call was refused as invalid usage. Lines made from NCCL's templates: its
prefix (src/debug.cc, "%s:%d:%d [%d] NCCL %s" with the hostname, pid, tid and CUDA device), its
bootstrap line ("Bootstrap : Using %s", src/bootstrap.cc), its "comm %p rank %d nranks %d
cudaDev %d busId %lx - Init COMPLETE" (src/init.cc, "nvmlDev %d" before busId from 2.19),
torch's "NCCL error in: %s, invalid usage, NCCL version %s" and its "ncclInvalidUsage: ..."
detail, and a program's own check printing the result's number (FastMoE's "NCCL Error at %s:%d
value %d"), with ncclResult_t's values from nccl.h."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top


def bootstrap(host: str, pid: int, device: int) -> str:
    return f"{host}:{pid}:{pid} [{device}] NCCL INFO Bootstrap : Using eth0:10.1.0.{pid % 200}<0>"


def complete(host: str, pid: int, device: int, bus: str, rank: int) -> str:
    return (f"{host}:{pid}:{pid} [{device}] NCCL INFO comm 0x55d1c2a0 rank {rank} nranks 2 "
            f"cudaDev {device} nvmlDev {device} busId {bus} commId 0x1f2e - Init COMPLETE")


TORCH_INVALID = ["RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
                 ":1191, invalid usage, NCCL version 2.10.3",
                 "ncclInvalidUsage: This usually reflects invalid usage of NCCL library."]
OWN_CHECK = ["NCCL Error at /src/moe/global_exchange.cpp:127 value 5"]


@pytest.mark.parametrize("failure", [TORCH_INVALID, OWN_CHECK])
@pytest.mark.parametrize("host", ["gpu1", "node-7.cluster"])
def test_processes_of_one_machine_on_one_gpu_refused_as_invalid_usage(
        tmp_path: Path, failure: list[str], host: str) -> None:
    lines = [bootstrap(host, 8194, 0), bootstrap(host, 8195, 0), *failure]
    found = top(tmp_path, lines)
    assert found.id == "duplicate-gpu" and found.severity == "error"
    assert f"On {host}, processes 8194, 8195" in found.explanation
    assert "[0]" in found.explanation and "CUDA_VISIBLE_DEVICES" in found.explanation


@pytest.mark.parametrize("lines", [
    # each process on a GPU of its own, each calling it [0]: their buses differ
    [bootstrap("gpu1", 8194, 0), bootstrap("gpu1", 8195, 0),
     complete("gpu1", 8194, 0, "1b000", 0), complete("gpu1", 8195, 0, "3d000", 1)],
    # the same index on two machines
    [bootstrap("gpu1", 8194, 0), bootstrap("gpu2", 8195, 0)],
    # two GPUs of one machine
    [bootstrap("gpu1", 8194, 0), bootstrap("gpu1", 8195, 1)],
])
def test_no_shared_gpu_where_the_prefixes_show_none(tmp_path: Path, lines: list[str]) -> None:
    found = top(tmp_path, [*lines, *TORCH_INVALID])
    assert found.id == "invalid-usage"


@pytest.mark.parametrize(("code", "finding_id"), [
    ("3", "internal-error"), ("2", "unexplained-failure")])
def test_one_gpu_shared_needs_nccls_refusal(tmp_path: Path, code: str, finding_id: str) -> None:
    # another result (an internal error, a system call's failure) says nothing of a shared GPU
    lines = [bootstrap("gpu1", 8194, 0), bootstrap("gpu1", 8195, 0),
             f"NCCL Error at /src/moe/global_exchange.cpp:127 value {code}"]
    assert top(tmp_path, lines).id == finding_id


@pytest.mark.parametrize(("line", "finding_id"), [
    ("NCCL Error at /src/comm.cu:42 value 5", "invalid-usage"),
    ("NCCL ERROR: allreduce failed, code 3", "internal-error"),
])
def test_a_programs_own_check_names_nccls_result_by_number(
        tmp_path: Path, line: str, finding_id: str) -> None:
    found = top(tmp_path, ["step 3", line])
    assert found.id == finding_id and found.severity == "error"
