"""Hang diagnosis on one machine (no root): --hang-action report keeps the job, SIGUSR1 dumps on
demand, and `--json` carries every rank's stack."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.slow]

LATE = textwrap.dedent("""
    import datetime, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    t = torch.ones(2)
    if dist.get_rank() == 1:
        time.sleep(float(sys.argv[1]))  # late, not dead
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} sum {t[0].item():g}", flush=True)
    dist.destroy_process_group()  # torch 2.13's Gloo may abort at exit without it (seen here)
""")
LOOP = textwrap.dedent("""
    import datetime, pathlib, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    stop = pathlib.Path(sys.argv[1], "stop")
    pathlib.Path(sys.argv[1], f"ready{dist.get_rank()}").write_text("")
    while True:
        t = torch.tensor([float(stop.exists())])
        dist.all_reduce(t)
        if t.item() > 0:
            break
        time.sleep(0.1)
    dist.barrier()
    dist.destroy_process_group()
""")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "PET_"))}


def _launch(tmp_path: Path, port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "ddpkit", "launch", "--nproc-per-node", "2", "--master-port",
            str(port), "--run-dir", str(tmp_path / "run"), *args]


@pytest.mark.timeout(150)
def test_report_keeps_the_job_running_and_json_has_the_stacks(tmp_path: Path, tcp_port: int) -> None:
    entry = tmp_path / "late.py"
    entry.write_text(LATE)
    done = subprocess.run(_launch(tmp_path, tcp_port, "--hang-timeout", "5", "--json", str(entry), "14"),
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the job looks hung: all 2 ranks made no progress" in done.stderr
    assert "rank 1 is at late.py:7 `time.sleep(float(sys.argv[1]))  # late, not dead`" in done.stderr
    doc = json.loads(done.stdout[done.stdout.index('{"schema"'):] if '{"schema"' in done.stdout
                     else done.stdout[done.stdout.index("{"):])
    [report] = doc["stack_reports"]
    assert report["reason"] == "hang" and len(report["stacks"]) == 2
    assert {s["rank"] for s in report["stacks"]} == {0, 1}
    assert any(line.startswith("likely cause: rank 1") for line in report["summary"])
    assert "rank 0 sum 2" in done.stdout or "rank 0 sum 2" in done.stderr


@pytest.mark.timeout(150)
def test_sigusr1_dumps_every_rank_and_the_job_goes_on(tmp_path: Path, tcp_port: int) -> None:
    entry = tmp_path / "loop.py"
    entry.write_text(LOOP)
    launcher = subprocess.Popen(_launch(tmp_path, tcp_port, str(entry), str(tmp_path)), env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    job: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 90
        while not all((tmp_path / f"ready{r}").exists() for r in (0, 1)):
            assert launcher.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(1.5)  # the watcher samples once a second
        job = psutil.Process(launcher.pid).children(recursive=True)
        launcher.send_signal(signal.SIGUSR1)
        summary = tmp_path / "run" / "stacks" / "summary.txt"
        while not summary.exists():
            assert launcher.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        text = summary.read_text()
        assert "stacks as asked (SIGUSR1)" in text
        assert (tmp_path / "run" / "stacks" / "rank0.txt").read_text().count("loop.py:") >= 1
        assert all(p.is_running() for p in job)
    finally:
        (tmp_path / "stop").write_text("")
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 0, err[-3000:]
    assert "stacks as asked (SIGUSR1)" in err
    _, alive = psutil.wait_procs(job, timeout=10)
    assert alive == []
