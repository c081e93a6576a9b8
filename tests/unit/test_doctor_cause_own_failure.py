"""causes/own_failure.py: one rank's uncaught exception of its own account, beside ranks whose
exceptions are the transport's consequences, is rank-failed naming that rank, ahead of the lost
connection. Lines made from the programs' formats: CPython's traceback (its head, a frame, the
exception "<type>: <message>"), torch's excepthook tag "[rank<N>]: " before each line
(distributed_c10d.py), Gloo's GLOO_ERROR_MSG in pair.cc ("[<file>:<line>] Connection closed by
peer <addr>", "Connection reset by peer"), ProcessGroupNCCL's error for ncclRemoteError ("NCCL
error in: <file>:<line>, remote process exited or there was a network error, NCCL version
<v>"); each rank's output in a file of its own, as torchrun --log-dir keeps it, or all in one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

GLOO_CLOSED = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
               "closed by peer [10.0.0.2]:41234")
GLOO_RESET = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
              "[10.0.0.3]:5517: Connection reset by peer")
NCCL_REMOTE = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
               "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, "
               "NCCL version 2.19.3")
OWN = ["ValueError: world_size 6 must be divisible by the tensor-parallel size 4",
       "KeyError: 'labels'", "AssertionError: batch size 7 is not divisible by 2 ranks",
       "FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-00017.tar'"]


def _rank(rank: int, exception: str) -> list[str]:
    return [f"[rank{rank}]: {line}" for line in [
        "Traceback (most recent call last):", '  File "train.py", line 41, in <module>',
        "    main()", exception]]


def _diagnose(tmp_path: Path, per_rank: dict[int, str], one_file: bool) -> list[Finding]:
    if one_file:
        log = tmp_path / "job.log"
        log.write_text("".join(f"{line}\n" for rank, exc in per_rank.items()
                               for line in _rank(rank, exc)))
        return diagnose([str(log)])
    paths = []
    for rank, exc in per_rank.items():
        path = tmp_path / f"rank{rank}.log"
        path.write_text("\n".join(_rank(rank, exc)) + "\n")
        paths.append(str(path))
    return diagnose(paths)


@pytest.mark.parametrize("own", OWN)
@pytest.mark.parametrize("after", [GLOO_CLOSED, GLOO_RESET, NCCL_REMOTE])
@pytest.mark.parametrize("one_file", [False, True])
def test_the_rank_that_failed_on_its_own_is_named_first(tmp_path: Path, own: str, after: str,
                                                        one_file: bool) -> None:
    found = _diagnose(tmp_path, {0: after, 1: own, 2: after}, one_file)
    top = found[0]
    assert (top.id, top.severity) == ("rank-failed", "error")
    assert "Rank 1 failed on its own account" in top.explanation
    assert own.split(":")[0] in top.explanation and "Ranks 0, 2 failed after it" in top.explanation
    assert top.evidence[0].text.endswith(own)  # its own line first, then a consequence
    assert "connection-lost" not in [f.id for f in found]  # explained, not a second cause


@pytest.mark.parametrize("other", [
    GLOO_CLOSED,  # every rank lost its peer: the cause is elsewhere
    "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 "
    "clients joined.",  # the distributed layer's own
    "torch.distributed.DistNetworkError: The client socket has failed to connect to "
    "[10.0.0.1]:29500 (errno: 111 - Connection refused).",
    "KeyboardInterrupt",  # stopped, not failed
])
def test_no_rank_of_its_own_account(tmp_path: Path, other: str) -> None:
    found = _diagnose(tmp_path, {0: GLOO_CLOSED, 1: other}, one_file=False)
    assert "failed on its own account" not in found[0].explanation


def test_a_rank_alone_names_no_other(tmp_path: Path) -> None:
    # no peer's consequence in the logs: the rank's failure reads as before (rank-failed)
    found = _diagnose(tmp_path, {1: OWN[0]}, one_file=False)
    assert found[0].id == "rank-failed" and "own account" not in found[0].explanation


def test_a_specific_cause_on_the_failing_rank_says_more(tmp_path: Path) -> None:
    # CUDA's allocator's words (c10/cuda/CUDACachingAllocator.cpp): out-of-memory names it better
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a "
           "total capacity of 79.10 GiB of which 1.25 GiB is free.")
    found = _diagnose(tmp_path, {0: GLOO_CLOSED, 1: oom}, one_file=False)
    assert found[0].id == "out-of-memory"


def test_a_chained_exception_counts_by_its_first(tmp_path: Path) -> None:
    # rank 1 lost its peer and re-raised it in its own words: its first exception is the
    # transport's, so no rank failed on its own account
    log = tmp_path / "rank1.log"
    log.write_text("\n".join([*_rank(1, GLOO_RESET), "[rank1]: ",
                              "[rank1]: The above exception was the direct cause of the "
                              "following exception:", "[rank1]: ",
                              *_rank(1, "RuntimeError: training step 812 failed")]) + "\n")
    other = tmp_path / "rank0.log"
    other.write_text("\n".join(_rank(0, GLOO_CLOSED)) + "\n")
    found = diagnose([str(other), str(log)])
    assert "own account" not in found[0].explanation
