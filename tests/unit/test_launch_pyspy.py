"""py-spy as ddpkit runs it: every failure is a finding with a fix, and each dump is bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddpkit.launch.hang.pyspy import Target, dump_all, find_py_spy, not_permitted_fix

REAL = find_py_spy(dict(os.environ), sys.executable)


@pytest.fixture
def sleeper(tmp_path: Path):  # type: ignore[no-untyped-def]
    script = tmp_path / "sleepy.py"
    script.write_text("import time\n\ndef nap():\n    time.sleep(60)\n\nprint('up', flush=True)\nnap()\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    yield proc, Target(0, proc.pid, psutil.Process(proc.pid).create_time(), rank=3, host="here")
    proc.kill()
    proc.wait()


def _fake(tmp_path: Path, body: str) -> str:
    path = tmp_path / "py-spy"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_found_next_to_python_when_not_on_path(tmp_path: Path) -> None:
    fake = _fake(tmp_path, "exit 0")
    assert find_py_spy({"PATH": "/nonexistent"}, str(tmp_path / "python")) == fake
    assert find_py_spy({"PATH": "/nonexistent"}, "/nonexistent/python") is None


def test_missing_py_spy_is_a_finding_for_every_rank(sleeper) -> None:  # type: ignore[no-untyped-def]
    _, target = sleeper
    [stack] = dump_all([target], None)
    assert stack.error_id == "py-spy-missing" and "pip install py-spy" in stack.fix


def test_a_rank_that_is_gone_is_reported_not_waited_for() -> None:
    [stack] = dump_all([Target(0, 2**22 + 7, 1.0)], "/bin/true")
    assert stack.error_id == "rank-exited"


def test_not_permitted_names_ptrace_and_the_fix(sleeper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, target = sleeper
    fake = _fake(tmp_path, "echo 'Error: Permission Denied: Try running again with elevated "
                           "permissions' >&2; exit 1")
    [stack] = dump_all([target], fake)
    assert stack.error_id == "py-spy-not-permitted" and "SYS_PTRACE" in stack.fix
    scope = tmp_path / "scope"
    scope.write_text("1\n")
    assert "kernel.yama.ptrace_scope is 1" in not_permitted_fix(str(scope))


def test_a_dump_that_does_not_answer_is_bounded(sleeper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, target = sleeper
    start = time.monotonic()
    [stack] = dump_all([target], _fake(tmp_path, "exec sleep 30"), timeout=1.0)
    assert time.monotonic() - start < 5 and stack.error_id == "stack-dump-timeout"


@pytest.mark.skipif(REAL is None, reason="py-spy not installed")
def test_real_dump_shows_the_line_and_its_source(sleeper) -> None:  # type: ignore[no-untyped-def]
    _, target = sleeper
    [stack] = dump_all([target], REAL)
    if stack.error_id == "py-spy-not-permitted":
        pytest.skip(f"ptrace not permitted here: {stack.fix}")
    assert stack.ok, stack.error
    main = stack.main_thread()
    assert main is not None and [f.name for f in main.frames] == ["nap", "<module>"]
    assert stack.code["sleepy.py:4"] == "time.sleep(60)"
