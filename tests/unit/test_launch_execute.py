"""run_process against real processes: output streaming, timeouts, and no orphans by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from ddpkit.launch.torchrun.processes import run_process

# A parent that starts a worker in a session of its own, exactly like torchrun does.
TREE = textwrap.dedent("""
    import subprocess, sys, time, pathlib
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             start_new_session=True)
    pathlib.Path(sys.argv[1]).write_text(f"{child.pid}\\n")
    print("started", flush=True)
    time.sleep(120)
""")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_file(path: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


@pytest.mark.timeout(60)
def test_output_is_streamed_and_exit_code_kept() -> None:
    lines: list[str] = []
    outcome = run_process([sys.executable, "-c", "print('a'); print('b'); raise SystemExit(4)"],
                          dict(os.environ), on_line=lines.append)
    assert lines == ["a", "b"]
    assert outcome.returncode == 4
    assert outcome.tail == ("a", "b")
    assert not outcome.timed_out and not outcome.interrupted


@pytest.mark.timeout(90)
def test_timeout_kills_the_whole_tree_even_a_detached_worker(tmp_path: Path) -> None:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    pidfile = tmp_path / "pid"
    outcome = run_process([sys.executable, str(script), str(pidfile)], dict(os.environ),
                          on_line=lambda _: None, timeout=3, grace=2)
    worker = int(pidfile.read_text())
    assert outcome.timed_out
    assert not _alive(worker), "the detached worker outlived the job"


@pytest.mark.timeout(90)
def test_interrupt_kills_the_tree_and_is_reported(tmp_path: Path) -> None:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    pidfile = tmp_path / "pid"

    def interrupt() -> None:
        _wait_file(pidfile)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    outcome = run_process([sys.executable, str(script), str(pidfile)], dict(os.environ),
                          on_line=lambda _: None, grace=2)
    worker = int(pidfile.read_text())
    assert outcome.interrupted
    assert not _alive(worker)
    assert not [p for p in psutil.Process().children(recursive=True) if p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.timeout(90)
def test_worker_left_behind_by_a_parent_that_exited_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "orphan.py"
    script.write_text(textwrap.dedent("""
        import subprocess, sys, time, pathlib
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                 start_new_session=True)
        pathlib.Path(sys.argv[1]).write_text(f"{child.pid}\\n")
        time.sleep(1.0)  # long enough for the tracker to see the child
    """))
    pidfile = tmp_path / "pid"
    outcome = run_process([sys.executable, str(script), str(pidfile)], dict(os.environ),
                          on_line=lambda _: None)
    worker = int(pidfile.read_text())
    assert outcome.returncode == 0
    assert worker in outcome.leftovers_killed
    assert not _alive(worker)


@pytest.mark.timeout(90)
def test_should_stop_ends_the_tree_with_its_reason(tmp_path: Path) -> None:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    pidfile = tmp_path / "pid"
    outcome = run_process([sys.executable, str(script), str(pidfile)], dict(os.environ),
                          on_line=lambda _: None, grace=2,
                          should_stop=lambda: "rank 3 failed" if pidfile.exists() else None)
    assert outcome.stopped == "rank 3 failed"
    assert not _alive(_wait_file(pidfile))


def test_a_start_deadline_counts_from_its_own_clock() -> None:
    from ddpkit.launch.torchrun.processes import StartDeadline

    fixed = StartDeadline(5, "late")
    assert not fixed.passed(100.0, 104.0) and fixed.passed(100.0, 106.0)
    origin: list[float] = []
    deferred = StartDeadline(5, "late", lambda: origin[0] if origin else None)
    assert not deferred.passed(100.0, 500.0)  # the clock has not started: no deadline yet
    origin.append(400.0)
    assert not deferred.passed(100.0, 404.0) and deferred.passed(100.0, 406.0)


@pytest.mark.timeout(60)
def test_the_tracker_finds_a_grandchild_whose_parent_it_met_in_the_same_scan() -> None:
    from ddpkit.launch.torchrun.processes import DescendantTracker

    # child -> grandchild started before the first scan: both are new to it at once
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)")
    parent = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {code!r}]).wait()"
    root = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 20
        while len(psutil.Process(root.pid).children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        expected = {p.pid for p in psutil.Process(root.pid).children(recursive=True)}
        assert len(expected) == 2
        tracker = DescendantTracker(root.pid)
        tracker.scan()
        assert set(tracker.seen) == expected
        tracker.scan()  # a second scan reads nothing new and keeps them
        assert set(tracker.seen) == expected
        assert {p.pid for p in tracker.alive()} == expected
    finally:
        for proc in psutil.Process(root.pid).children(recursive=True):
            proc.kill()
        root.kill()
        root.wait(timeout=10)


@pytest.mark.timeout(60)
def test_the_tracker_meets_a_process_started_after_its_first_scan_and_not_an_unrelated_one() -> None:
    from ddpkit.launch.torchrun.processes import DescendantTracker

    root = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline(); "
                             "import subprocess; subprocess.Popen([sys.executable, '-c', "
                             "'import time; time.sleep(30)']); import time; time.sleep(30)"],
                            stdin=subprocess.PIPE, text=True)
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tracker = DescendantTracker(root.pid)
        tracker.scan()
        assert tracker.seen == {}
        assert root.stdin is not None
        root.stdin.write("go\n")
        root.stdin.flush()
        deadline = time.monotonic() + 20
        while not tracker.seen and time.monotonic() < deadline:
            time.sleep(0.05)
            tracker.scan()
        child = psutil.Process(root.pid).children()
        assert set(tracker.seen) == {c.pid for c in child} and len(child) == 1
        assert unrelated.pid not in tracker.seen
    finally:
        for proc in psutil.Process(root.pid).children(recursive=True):
            proc.kill()
        root.kill()
        unrelated.kill()
        root.wait(timeout=10)
        unrelated.wait(timeout=10)


@pytest.mark.timeout(60)
def test_the_exit_wait_returns_when_the_child_exits_and_does_not_poll_it_meanwhile() -> None:
    """run_process's loop waits for torchrun between its checks; on Linux through a pidfd, without
    Popen.wait's polling (about ten wake-ups per 0.2 s wait, issue 31's launch overhead)."""
    from ddpkit.launch.torchrun.processes import ExitWait

    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE, text=True)
    polls = 0
    real_try_wait = proc._try_wait  # type: ignore[attr-defined]  # what Popen.wait polls with

    def counted(flags: int) -> tuple[int, int]:
        nonlocal polls
        polls += 1
        return real_try_wait(flags)  # type: ignore[no-any-return]

    proc._try_wait = counted  # type: ignore[attr-defined]
    waiting, fallback = ExitWait(proc), ExitWait(proc)
    fallback.close()  # as where there is no pidfd: Popen.wait(timeout)
    try:
        waiting.wait(0.3)  # the child lives: the timeout ends the wait
        assert proc.poll() is None
        polls_by_pidfd = polls
        fallback.wait(0.3)
        assert proc.poll() is None and polls > polls_by_pidfd  # the count sees Popen's polling
        assert proc.stdin is not None
        proc.stdin.close()  # the child ends
        waiting.wait(50)  # returns at its end, long before 50 s (the test's timeout is 60)
        assert proc.poll() == 0
    finally:
        waiting.close()
        proc.kill()
        proc.wait()
    if sys.platform == "linux" and hasattr(os, "pidfd_open"):
        assert polls_by_pidfd == 0
