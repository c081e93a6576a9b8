"""Jobs started together from one directory each get a run directory of their own (issue 32):
six one-rank jobs launched in the same second, one of them failing with a ValueError, never see
each other's output, and the failing one's summary quotes its own exception."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from ddpkit.errors import JobFailed

pytestmark = [pytest.mark.slow]

JOBS = 6
FAILING = 3
SCRIPT = textwrap.dedent("""
    import sys, time
    job = sys.argv[1]
    for step in range(3):
        print(f"marker-job-{job} step {step}", flush=True)
        time.sleep(0.2)
    if job == "3":
        raise ValueError("deliberate failure of marker-job-3")
""")


def _ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "PET_"))}


@pytest.mark.timeout(400)
def test_six_jobs_started_together_keep_their_own_output(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    procs = []
    started = time.time()
    for index, port in enumerate(_ports(JOBS)):
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "ddpkit", "launch", "--nproc-per-node", "1", "--master-port",
             str(port), "--hang-timeout", "0", str(script), str(index)],
            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    assert time.time() - started < 1.0  # all six started within one second
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    runs = sorted((tmp_path / "ddpkit-runs").iterdir())
    assert len(runs) == JOBS, [r.name for r in runs]
    for index, (code, out, err) in enumerate(results):
        others = [f"marker-job-{j}" for j in range(JOBS) if j != index]
        assert f"marker-job-{index} step 2" in out + err, err[-2000:]
        assert not any(other in out + err for other in others), (index, out, err[-3000:])
        if index == FAILING:
            assert code == JobFailed.exit_code, err[-3000:]
            assert "ValueError: deliberate failure of marker-job-3" in err, err[-3000:]
        else:
            assert code == 0, err[-3000:]
    for run in runs:
        logs = [run / "torchrun.log", *(run / "torchrun").rglob("*.log")]
        text = "".join(p.read_text(errors="replace") for p in logs if p.is_file())
        jobs = {j for j in range(JOBS) if f"marker-job-{j}" in text}
        assert len(jobs) == 1, (run.name, jobs)
    assert not [p for p in psutil.process_iter(["cmdline"])
                if str(script) in " ".join(p.info["cmdline"] or [])]
