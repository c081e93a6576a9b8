"""`ddpkit stacks` on a run directory another user controls (issue 22): only that user's ranks
are dumped, source lines only from files the rank's user may read, and no escape sequence from a
frame reaches the terminal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.launch.hang.pyspy import with_code
from ddpkit.launch.hang.readable_source import Reader, reader_of, source_line
from ddpkit.launch.hang.stacks import Frame, RankStack, ThreadStack, parse_pyspy_json, render_stack
from ddpkit.launch.hang.watcher import dump_run_dirs

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
pytestmark = pytest.mark.timeout(60)
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b1A\r"


def _sleeper(user: int | None = None) -> subprocess.Popen[str]:
    """A process of ``user`` (``sleep``: the test's Python may not be reachable by nobody)."""
    proc = subprocess.Popen(["sleep", "60"], user=user)
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).uids().real != (user or 0) and time.monotonic() < deadline:
        time.sleep(0.01)  # between fork and setuid
    return proc


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can reach (pytest's own tmp_path is root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="ddpkit-trust-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()
    assert all(not psutil.pid_exists(p.pid) or psutil.Process(p.pid).status() == "zombie"
               for p in started)


def _registry(run_dir: Path, pids: list[int], owner: int) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "ranks.json").write_text(json.dumps({
        "schema": "ddpkit.ranks/1", "node_rank": 0, "host": "here", "torchrun_pid": 1,
        "ranks": [{"local_rank": i, "rank": i, "pid": pid,
                   "create_time": psutil.Process(pid).create_time()}
                  for i, pid in enumerate(pids)]}))
    os.chown(run_dir / "ranks.json", owner, owner)
    os.chown(run_dir, owner, owner)


def _recording_py_spy(tmp_path: Path) -> tuple[str, Path]:
    calls = tmp_path / "py-spy-calls"
    fake = tmp_path / "py-spy"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\necho '[]'\n")
    fake.chmod(0o755)
    return str(fake), calls


@needs_root
def test_a_pid_of_another_user_is_refused_and_never_given_to_py_spy(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    procs += [_sleeper(), _sleeper(NOBODY)]
    root_owned, users = procs
    # nobody's ranks.json names root's process (and claims pid 1 is its torchrun)
    _registry(tmp_path / "run", [root_owned.pid, users.pid], NOBODY)
    py_spy, calls = _recording_py_spy(tmp_path)
    stacks = {s.pid: s for s in dump_run_dirs([tmp_path / "run"], py_spy)}
    assert stacks[root_owned.pid].error_id == "foreign-pid"
    assert f"belongs to uid 0, not to uid {NOBODY}" in stacks[root_owned.pid].error
    assert stacks[users.pid].error_id is None  # the run's own rank is dumped
    assert calls.read_text().split() == ["dump", "--json", "--pid", str(users.pid)]


@needs_root
def test_the_cli_refuses_a_foreign_pid(run_cli: Callable[..., Any], tmp_path: Path,
                                       procs: list[subprocess.Popen[str]]) -> None:
    procs.append(_sleeper())
    _registry(tmp_path / "run", [procs[0].pid], NOBODY)
    result = run_cli("stacks", str(tmp_path / "run"), "--json")
    assert result.code == 1
    (stack,) = result.json()["stacks"]
    assert stack["error_id"] == "foreign-pid" and stack["threads"] == []


@needs_root
def test_source_lines_only_from_files_the_ranks_user_can_read(shared_dir: Path) -> None:
    tmp_path = shared_dir
    nobody = Reader(NOBODY, frozenset({NOBODY}))
    public = tmp_path / "public.py"
    public.write_text("first\n  second line  \n")
    public.chmod(0o644)
    secret = tmp_path / "secret.py"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "open.py").write_text("behind a closed door\n")
    (closed / "open.py").chmod(0o644)
    (tmp_path / "link.py").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.py")
    assert source_line(str(public), 2, nobody) == "second line"
    assert source_line(str(public), 3, nobody) == ""
    assert source_line(str(secret), 1, nobody) == ""
    assert source_line(str(secret), 1, Reader(0, frozenset())) == "root only"
    assert source_line(str(closed / "open.py"), 1, nobody) == ""
    assert source_line(str(tmp_path / "link.py"), 1, nobody) == ""
    start = time.monotonic()
    assert source_line(str(tmp_path / "fifo.py"), 1, Reader(0, frozenset())) == ""
    assert time.monotonic() - start < 5


@needs_root
def test_with_code_reads_with_the_ranks_rights(shared_dir: Path,
                                               procs: list[subprocess.Popen[str]]) -> None:
    tmp_path = shared_dir
    procs.append(_sleeper(NOBODY))
    pid = procs[0].pid
    reader = reader_of(pid)
    assert reader is not None and reader.uid == NOBODY
    secret = tmp_path / "secret.py"
    secret.write_text("password = 'hunter2'\n")
    secret.chmod(0o600)
    readable = tmp_path / "train.py"
    readable.write_text("import time\n\ntime.sleep(60)  \x1b[2J\n")
    frames = (Frame("leak", str(secret), "secret.py", 1), Frame("<module>", str(readable),
                                                                readable.name, 3))
    stack = with_code(RankStack(0, pid, threads=(ThreadStack(1, "MainThread", pid, True, frames),)))
    assert stack.code == {f"{readable.name}:3": "time.sleep(60)"}


def test_escape_sequences_in_frames_are_stripped(tmp_path: Path) -> None:
    out = json.dumps([{"thread_id": 1, "thread_name": f"Main{ESCAPES}", "os_thread_id": 9,
                       "active": True, "frames": [
                           {"name": f"step{ESCAPES}", "filename": f"/w/t{ESCAPES}.py",
                            "short_filename": f"t{ESCAPES}.py", "line": 4}]}])
    threads = parse_pyspy_json(out)
    stack = RankStack(0, 9, rank=0, threads=threads, code={"t.py:4": "x = 1"})
    text = render_stack(stack)
    assert "step (t.py:4)" in text and "Thread 9 (active): \"Main\"" in text
    assert not any(ch in text for ch in "\x1b\x07\x9b\r")
    # a crafted stacks.json, as `doctor --log` reads it
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    crafted = stack.to_dict() | {"host": f"h{ESCAPES}", "code": {"t.py:4": f"y{ESCAPES}"},
                                 "threads": [{"thread_id": 1, "name": "MainThread",
                                              "os_thread_id": 9, "active": True, "frames": [
                                                  {"name": f"a{ESCAPES}", "filename": "/w/t.py",
                                                   "short": "t.py", "line": "4x"}]}]}
    (stacks / "stacks.json").write_text(json.dumps({"stacks": [crafted, crafted | {"rank": 1}]}))
    (found,) = diagnose([str(stacks)])
    shown = json.dumps(found.to_dict(), ensure_ascii=False)
    assert found.id == "job-hung" and not any(ch in shown for ch in "\x1b\x07\x9b\r")
