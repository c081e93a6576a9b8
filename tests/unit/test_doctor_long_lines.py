"""A line longer than the evidence it is quoted as (findings.EVIDENCE_TEXT_LIMIT) has its facts
read from the whole line: the cause often comes last, after a long path or command. Lines made
from torch's CUDA initialization warning (torch/cuda/__init__.py, _check_driver's warn of c10's
"Unexpected error from cudaGetDeviceCount(). ... Error %d: %s", CUDAFunctions.cpp) and DeepSpeed's
launcher (launcher/launch.py, sigkill_handler: f"{cmd} exits with return code = {code}")."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import EVIDENCE_TEXT_LIMIT
from ddpkit.doctor.log.diagnose import diagnose

CUDA_WARNING = ("{prefix}/opt/conda/envs/{env}/lib/python3.9/site-packages/torch/cuda/__init__.py:"
                "129: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount()."
                " Did you run some cuda functions before calling NumCudaDevices() that might have "
                "already set an error? Error 802: system not yet initialized (Triggered internally "
                "at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)")


@pytest.mark.parametrize("env", ["w", "a-much-longer-conda-environment-name-for-this-project"])
@pytest.mark.parametrize("prefix", ["", "[rank0]: ", "[default0]:"])
def test_a_cuda_error_at_the_end_of_a_long_line_is_read(tmp_path: Path, env: str,
                                                        prefix: str) -> None:
    line = CUDA_WARNING.format(prefix=prefix, env=env)
    log = tmp_path / "node.log"
    log.write_text(f"{line}\n{prefix}CUDA available: False\n")
    (top, *_) = diagnose([str(log)])
    assert (top.id, top.severity) == ("cuda-error", "warning")
    assert "cudaErrorSystemNotReady" in top.explanation
    assert all(len(e.text) <= EVIDENCE_TEXT_LIMIT for e in top.evidence)


def test_a_launchers_long_command_before_the_exit_code(tmp_path: Path) -> None:
    command = ["/usr/bin/python3", "-u", "finetune.py", "--local_rank=3",
               *(f"--option_{n}=value_{n}" for n in range(40))]
    line = (f"[2026-01-05 10:00:00,000] [ERROR] [launch.py:341:sigkill_handler] {command} exits "
            "with return code = -9")
    assert len(line) > 2 * EVIDENCE_TEXT_LIMIT
    log = tmp_path / "node.log"
    log.write_text(line + "\n")
    (top, *_) = diagnose([str(log)])
    assert top.severity == "error"
    assert "SIGKILL" in top.explanation or "-9" in top.explanation
