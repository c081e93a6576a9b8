"""Whatever kills `ddpkit launch`, its job dies with it (issue 11): SIGKILL leaves no torchrun and
no rank running (each rank sits in a session of its own, out of reach of a group signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddpkit.launch.torchrun.command import AGENT

pytestmark = [pytest.mark.slow]


def _ranks_started(run_dir: Path, count: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        logs = list(run_dir.glob("torchrun/*/attempt_*/*/stdout.log"))
        if sum(1 for log in logs if "sleeping" in log.read_text(errors="replace")) == count:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.timeout(120)
def test_sigkill_of_launch_takes_torchrun_and_every_rank_with_it(tmp_path: Path, tcp_port: int) -> None:
    script = tmp_path / "train.py"
    script.write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "PET_"))}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "ddpkit", "launch", "--nproc-per-node", "2", "--master-port",
         str(tcp_port), "--run-dir", str(tmp_path / "run"), str(script)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    job: list[psutil.Process] = []
    try:
        assert _ranks_started(tmp_path / "run", 2, time.monotonic() + 60), "the ranks never started"
        job = psutil.Process(launcher.pid).children(recursive=True)
        ranks = [p for p in job if p.cmdline()[-1:] == [str(script)] and AGENT not in p.cmdline()]
        assert len(ranks) == 2 and any(AGENT in p.cmdline() for p in job)  # and torchrun
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=10)
        gone, alive = psutil.wait_procs(job, timeout=20)
        assert alive == [], f"still running after ddpkit was killed: {alive}"
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for proc in job:
            if proc.is_running():
                proc.kill()


@pytest.mark.timeout(120)
def test_sigterm_says_what_was_stopped_and_stops_it(tmp_path: Path, tcp_port: int) -> None:
    script = tmp_path / "train.py"
    script.write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "PET_"))}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "ddpkit", "launch", "--nproc-per-node", "2", "--master-port",
         str(tcp_port), "--run-dir", str(tmp_path / "run"), str(script)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    job: list[psutil.Process] = []
    try:
        assert _ranks_started(tmp_path / "run", 2, time.monotonic() + 60), "the ranks never started"
        job = psutil.Process(launcher.pid).children(recursive=True)
        launcher.send_signal(signal.SIGTERM)  # ddpkit treats SIGTERM exactly like Ctrl-C
        _, err = launcher.communicate(timeout=30)
        assert launcher.returncode == 130
        assert "interrupted: stopped torchrun and 2 rank processes on node 0" in err, err[-2000:]
        _, alive = psutil.wait_procs(job, timeout=10)
        assert alive == []
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for proc in job:
            if proc.is_running():
                proc.kill()
