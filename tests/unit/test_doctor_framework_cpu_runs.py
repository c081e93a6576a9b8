"""What Lightning's Trainer and an accelerate script printed when they failed (or worked) on two
CPU processes over Gloo (tests/fixtures/logs/frameworks-cpu/, made by its make.sh with torch
2.13.0, lightning 2.6.6 and accelerate 1.16.0), read by `doctor --log`. The lines are the
frameworks' own; the expected answer is the cause each script plants."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "frameworks-cpu"

EXPECTED = {
    # Lightning: rank 1's training_step raises at its third batch
    "l_own": ("rank-failed", "error", "Rank 1 failed on its own account: ValueError"),
    # Lightning's ddp_spawn (processes of torch.multiprocessing): rank 1's own error
    "l_spawn_own": ("rank-failed", "error", "Process 1 of mp.spawn"),
    # accelerate launch: rank 1's batch of another width
    "acli_own": ("rank-failed", "error", "Rank 1 failed on its own account: RuntimeError: mat1"),
    # Lightning: a submodule the loss never uses, without find_unused_parameters
    "l_unused": ("invalid-usage", "error", "some parameters took no part in the loss"),
    # Lightning: two epochs that finished
    "l_ok": ("no-failure", "info", "max_epochs=2"),
    # accelerate: rank 1's batch of another width at its second step
    "a_own": ("rank-failed", "error", "Rank 1 failed on its own account: RuntimeError: mat1"),
    # accelerate: gather of 4 floats on rank 0 and 5 on rank 1
    "a_gather": ("collective-timeout", "error", "different sizes"),
    # DeepSpeed's launcher: rank 1 killed by SIGKILL, rank 0's Gloo connection reset after it;
    # the launcher reports the -9 before it stops the others
    "ds_kill9": ("out-of-memory", "error", "the launcher did not send it"),
    # DeepSpeed's launcher: both processes of an all_reduce exit with 0
    "ds_ok": ("no-failure", "info", "exits successfully"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_frameworks_run_reads_as_its_cause(name: str) -> None:
    finding_id, severity, words = EXPECTED[name]
    top = diagnose([str(RUNS / f"{name}.log")])[0]
    assert (top.id, top.severity) == (finding_id, severity)
    assert words in top.explanation
