"""Reading ranks' Python stacks with ``py-spy dump`` (a declared dependency), bounded in time.

py-spy reads another process's memory (``process_vm_readv``), which needs ptrace permission over
it. Every failure is a finding with its fix, never an exception and never a wait without end:
all ranks are dumped at once, each bounded by ``timeout`` seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from ddpkit.i18n import _
from ddpkit.launch.hang.readable_source import reader_of, source_line
from ddpkit.launch.hang.stacks import RankStack, is_library, parse_pyspy_json
from ddpkit.wording import clauses

DUMP_TIMEOUT_S = 5.0
PTRACE_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"
INSTALL_FIX = _("install it where ddpkit runs: `pip install py-spy` (ddpkit declares it; "
                "reinstalling ddpkit brings it), or put it on PATH")


@dataclass(frozen=True)
class Target:
    """A rank to dump: its pid and start time (so a reused pid is never read)."""

    local_rank: int
    pid: int
    create_time: float
    rank: int | None = None
    node_rank: int | None = None
    host: str = ""


def find_py_spy(env: Mapping[str, str], python: str) -> str | None:
    """py-spy on the workers' PATH, else next to ``python`` (a venv's bin/, not always on PATH)."""
    found = shutil.which("py-spy", path=env.get("PATH"))
    if found:
        return found
    sibling = Path(python).parent / "py-spy"
    return str(sibling) if sibling.is_file() and os.access(sibling, os.X_OK) else None


def not_permitted_fix(scope_path: str = PTRACE_SCOPE) -> str:
    scope = None
    with contextlib.suppress(OSError, ValueError):
        scope = int(Path(scope_path).read_text().strip())
    fixes = []
    if scope is not None and scope > 0:
        fixes.append(_("kernel.yama.ptrace_scope is {scope}: `sudo sysctl "
                       "kernel.yama.ptrace_scope=0` (3 cannot be lowered without a reboot)",
                       scope=scope) if scope < 3 else
                     _("kernel.yama.ptrace_scope is 3 (ptrace disabled until reboot)"))
    fixes.append(_("in a container, add the SYS_PTRACE capability (`docker run --cap-add "
                   "SYS_PTRACE`, Kubernetes securityContext.capabilities.add: [SYS_PTRACE])"))
    fixes.append(_("or run ddpkit as the ranks' user with sudo"))
    return clauses(fixes)


def dump_all(targets: Sequence[Target], py_spy: str | None, *,
             timeout: float = DUMP_TIMEOUT_S) -> list[RankStack]:
    """Every target's stack, dumped concurrently; at most ``timeout`` seconds (plus a kill)."""
    if py_spy is None:
        return [failed(t, "py-spy-missing", _("py-spy is not installed"), INSTALL_FIX)
                for t in targets]
    running: list[tuple[Target, subprocess.Popen[str] | None, str]] = []
    for target in targets:
        if not _same_process(target):
            running.append((target, None, ""))
            continue
        try:
            proc = subprocess.Popen([py_spy, "dump", "--json", "--pid", str(target.pid)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, errors="replace")
        except OSError as exc:
            running.append((target, None, _("cannot run {program}: {error}", program=py_spy,
                                            error=str(exc.strerror))))
            continue
        running.append((target, proc, ""))
    deadline = time.monotonic() + timeout
    stacks = []
    for target, child, error in running:
        if child is None:
            stacks.append(failed(target, "py-spy-missing", error, INSTALL_FIX) if error else
                          _exited(target))
            continue
        try:
            out, err = child.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            stacks.append(failed(target, "stack-dump-timeout",
                                  _("py-spy did not answer within {seconds:g} s",
                                    seconds=timeout),
                                  _("run `py-spy dump --pid {pid}` by hand; a process in "
                                    "uninterruptible sleep (D state, e.g. a stuck driver call) "
                                    "cannot be read", pid=target.pid)))
            continue
        stacks.append(_result(target, child.returncode, out, err))
    return stacks


def _result(target: Target, code: int, out: str, err: str) -> RankStack:
    if code == 0:
        try:
            threads = parse_pyspy_json(out)
        except ValueError as exc:
            return failed(target, "stack-dump-unreadable",
                          _("py-spy printed no stack: {error}", error=str(exc)),
                          _("upgrade py-spy (`pip install -U py-spy`)"))
        return with_code(RankStack(local_rank=target.local_rank, pid=target.pid, rank=target.rank,
                                   node_rank=target.node_rank, host=target.host, threads=threads))
    if not _same_process(target):
        return _exited(target)
    first = next((line.strip() for line in err.splitlines() if line.strip()), f"exit {code}")
    low = err.lower()
    if "permission denied" in low or "operation not permitted" in low or "eperm" in low:
        return failed(target, "py-spy-not-permitted",
                      _("py-spy may not read pid {pid}: {why}", pid=target.pid, why=first),
                      not_permitted_fix())
    return failed(target, "stack-dump-failed", _("py-spy failed: {why}", why=first),
                  _("run `py-spy dump --pid {pid}` by hand to see why", pid=target.pid))


def with_code(stack: RankStack) -> RankStack:
    """The source line of every user-code frame, read from the file (as a traceback shows it),
    only where the rank's own user could read it (:func:`ddpkit.launch.hang.readable_source.source_line`:
    a root ``ddpkit stacks`` must not print a file the rank names but may not read)."""
    reader = reader_of(stack.pid)
    if reader is None:
        return stack
    code = {}
    for thread in stack.threads:
        for frame in thread.frames:
            if not is_library(frame) and frame.at() not in code:
                text = source_line(frame.filename, frame.line, reader)
                if text:
                    code[frame.at()] = text
    return replace(stack, code=code)


def _same_process(target: Target) -> bool:
    try:
        proc = psutil.Process(target.pid)
        same = abs(proc.create_time() - target.create_time) < 0.01
        return bool(same and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _exited(target: Target) -> RankStack:
    return failed(target, "rank-exited", _("the rank exited before or while its stack was read"),
                  _("nothing to fix here: its exit status and logs tell how it ended"))


def failed(target: Target, error_id: str, error: str, fix: str) -> RankStack:
    return RankStack(local_rank=target.local_rank, pid=target.pid, rank=target.rank,
                     node_rank=target.node_rank, host=target.host, error_id=error_id, error=error,
                     fix=fix)
