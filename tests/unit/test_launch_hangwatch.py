"""The watcher on a real process tree (a stand-in for torchrun and two idle ranks), on a fake clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from ddpkit.launch.hang.model import HangPolicy
from ddpkit.launch.hang.pyspy import find_py_spy
from ddpkit.launch.hang.watcher import HANG_STOPPED, HangWatcher

AGENT = textwrap.dedent("""
    import os, subprocess, sys, time
    kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, "LOCAL_RANK": str(i), "RANK": str(2 + i)})
            for i in range(2)]
    print("up", flush=True)
    time.sleep(60)
""")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def agent():  # type: ignore[no-untyped-def]
    proc = subprocess.Popen([sys.executable, "-c", AGENT], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    deadline = time.monotonic() + 20
    while len(psutil.Process(proc.pid).children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the children's interpreters are up
    yield proc
    kids = psutil.Process(proc.pid).children(recursive=True)
    for p in [*kids, psutil.Process(proc.pid)]:
        p.kill()
    psutil.wait_procs(kids, timeout=10)
    proc.wait()


def _watcher(tmp_path: Path, action: str, clock: Clock, said: list[str]) -> HangWatcher:
    return HangWatcher(run_dir=tmp_path, log_dir=str(tmp_path / "torchrun"), node_rank=1,
                       host="node1", policy=HangPolicy(timeout_s=5), action=action,
                       py_spy=find_py_spy(dict(os.environ), sys.executable), say=said.append,
                       clock=clock, stop_grace=3)


def test_idle_ranks_are_dumped_then_stopped_after_the_grace(agent, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clock, said = Clock(), []
    watch = _watcher(tmp_path, "stop", clock, said)
    watch.started(agent.pid)
    answers = []
    for step in range(12):
        clock.now = float(step)
        answers.append(watch.poll())
    registry = json.loads((tmp_path / "ranks.json").read_text())
    assert [(r["local_rank"], r["rank"]) for r in registry["ranks"]] == [(0, 2), (1, 3)]
    assert answers[:8] == [None] * 8 and answers[8:] == [HANG_STOPPED] * 4  # hung at 5, stop at 8
    [report] = watch.reports
    assert report.reason == "hang" and [s.rank for s in report.stacks] == [2, 3]
    assert said[0].startswith("node 1 (node1): the job looks hung: all 2 ranks made no progress")
    assert (tmp_path / "stacks" / "rank2.txt").exists() and (tmp_path / "stacks" / "stacks.json").exists()
    assert all(p.is_running() for p in psutil.Process(agent.pid).children())  # nothing killed


def test_report_only_reports_once_and_a_request_dumps_at_once(agent, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import threading

    clock, said = Clock(), []
    watch = _watcher(tmp_path, "report", clock, said)
    watch.request = threading.Event()
    watch.started(agent.pid)
    for step in range(20):
        clock.now = float(step)
        assert watch.poll() is None
    assert [r.reason for r in watch.reports] == ["hang"]
    watch.request.set()
    clock.now = 20.2  # a request does not wait for the next sample
    assert watch.poll() is None
    assert [r.reason for r in watch.reports] == ["hang", "asked"]


def test_the_job_counter_is_joined_only_after_the_ranks_ran_a_while(agent, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clock, said, made = Clock(), [], []

    class Exchange:
        def progressed(self) -> None: ...
        def value(self) -> int | None:
            return 7
        def close(self) -> None: ...

    def factory() -> Exchange:
        made.append(clock.now)
        return Exchange()

    watch = _watcher(tmp_path, "report", clock, said)
    watch.policy = HangPolicy(timeout_s=60)
    watch.exchange_factory = factory  # type: ignore[assignment]
    assert watch.exchange_after() == 10.0
    watch.started(agent.pid)
    for step in range(15):
        clock.now = 100.0 + step
        watch.poll()
    assert made == [110.0]  # ranks first seen at 100: joined 10 s later, once
    short = _watcher(tmp_path, "report", clock, said)
    assert short.exchange_after() == 5 / 4  # a quarter of a short --hang-timeout


def test_a_sigstopped_rank_is_named_as_the_likely_cause(agent, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 22: a stopped rank (state T) looked like every waiting rank; now it is named."""
    import signal

    clock, said = Clock(), []
    watch = _watcher(tmp_path, "report", clock, said)
    watch.started(agent.pid)
    rank1 = next(p for p in psutil.Process(agent.pid).children()
                 if p.environ().get("LOCAL_RANK") == "1")
    rank1.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 10
        while rank1.status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for step in range(8):
            clock.now = float(step)
            watch.poll()
    finally:
        rank1.send_signal(signal.SIGCONT)
    [report] = watch.reports
    cause = f"likely cause: rank 3 (pid {rank1.pid}) is stopped (state T: SIGSTOP or a debugger)"
    assert report.lines()[0].startswith(cause)
    assert any(line.strip().startswith(cause) for line in said)
    assert not any("likely cause: rank 2" in line for line in report.lines())


def test_the_job_counter_stops_once_this_nodes_ranks_have_ended(agent, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clock, said, stopped = Clock(), [], []

    class Exchange:
        def progressed(self) -> None: ...
        def value(self) -> int | None:
            return 7
        def stop(self) -> None:
            stopped.append(clock.now)
        def close(self) -> None: ...

    watch = _watcher(tmp_path, "report", clock, said)
    watch.policy = HangPolicy(timeout_s=60)
    watch.exchange_factory = Exchange  # type: ignore[assignment]
    watch.started(agent.pid)
    for step in range(12):
        clock.now = 100.0 + step
        watch.poll()
    assert watch.exchange is not None and stopped == []
    kids = psutil.Process(agent.pid).children()
    for kid in kids:
        kid.kill()
    psutil.wait_procs(kids, timeout=10)
    clock.now = 120.0
    watch.poll()
    assert stopped == [120.0]  # before torchrun's exit barrier can take the job's store away
