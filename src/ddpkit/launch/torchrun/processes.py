"""Running a planned command: own process group, live output, signals, and no orphans.

torchrun starts each worker in a session of its own, so killing torchrun's process group is not
enough: every descendant seen while the job ran is remembered (pid + start time) and any that is
still alive at the end is killed by pid.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import psutil

TERMINATE_GRACE_S = 10.0
TAIL_LINES = 400
POLL_S = 0.2  # how often a running torchrun is checked (stop requests, deadlines, its ranks)
STATE_EVERY_S = 1.0  # how often ``on_state`` is told (counting live children reads /proc)


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int
    tail: tuple[str, ...]  # the last lines it printed
    timed_out: bool
    interrupted: bool
    stopped: str | None  # why ``should_stop`` ended the run early, if it did
    duration_s: float
    leftovers_killed: tuple[int, ...]  # descendants still alive at the end, killed by pid
    descendants_seen: int = 0  # processes the command started while it ran (torchrun: its ranks)
    descendants_stopped: int = 0  # of those, the ones alive when ddpkit began to stop the tree


@dataclass(frozen=True)
class ProcessState:
    """A running command as its poll loop sees it, for a front end's status lines: whether it has
    started any child yet (torchrun: its ranks, after the rendezvous) and how many still live."""

    elapsed_s: float
    started_children: bool
    alive_children: int


class RankOutput(Protocol):
    """Output a process writes somewhere other than its pipe, followed while it runs."""

    def start(self, emit: Callable[[str], None]) -> None: ...

    def stop(self) -> None: ...


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGTERM when ddpkit dies, however it dies (SIGKILL too).

    torchrun handles SIGTERM by stopping its workers (each in a session of its own, which no
    process-group signal reaches), so a killed ``ddpkit launch`` leaves no rank running. Linux only;
    elsewhere this does nothing and the normal cleanup paths remain.
    """

    def arm() -> None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            return
        if os.getppid() != parent_pid:  # ddpkit died before the signal was armed
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


@dataclass(frozen=True)
class StartDeadline:
    """Stop the run, with ``reason``, if it has started no child process ``seconds`` after the
    clock started: the process's start, or the monotonic time ``started_at()`` gives once it is
    not None (a worker's clock starts when the master answered)."""

    seconds: float
    reason: str
    started_at: Callable[[], float | None] | None = None

    def passed(self, process_start: float, now: float) -> bool:
        origin = process_start if self.started_at is None else self.started_at()
        return origin is not None and now - origin > self.seconds


class DescendantTracker:
    """Remembers every descendant of a process, so none outlives the job.

    A scan reads the parent of processes it has not met before only: psutil's
    ``children(recursive=True)`` reads every process's ``/proc/<pid>/stat`` on each call (about 2
    ms with 70 processes, five times a second, on every node, for the whole job; more on a GPU
    machine with its data-loader workers), but a process's parent when first met is all that
    places it in the tree. A pid that disappears is forgotten, so a reused pid is read again.
    """

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.seen: dict[int, float] = {}
        self._met: set[int] = set()  # every process a scan has read, while it lives

    def scan(self) -> None:
        try:
            pids = psutil.pids()
        except (psutil.Error, OSError):
            return
        new: list[tuple[int, int, float]] = []  # (pid, parent, start time) of processes not met before
        for pid in pids:
            if pid in self._met:
                continue
            try:
                proc = psutil.Process(pid)
                with proc.oneshot():
                    parent, created = proc.ppid(), proc.create_time()
            except psutil.Error:
                continue
            self._met.add(pid)
            new.append((pid, parent, created))
        tree = {self.root_pid, *self.seen}
        grown = True
        while grown:  # a new process's parent may be new too, listed after it
            grown = False
            for pid, parent, created in new:
                if pid not in tree and parent in tree:
                    tree.add(pid)
                    self.seen.setdefault(pid, created)
                    grown = True
        self._met &= set(pids)

    def alive(self) -> list[psutil.Process]:
        procs = []
        for pid, created in sorted(self.seen.items()):
            try:
                proc = psutil.Process(pid)
                if abs(proc.create_time() - created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                    procs.append(proc)
            except psutil.Error:
                continue
        return procs


class ExitWait:
    """Waits up to a timeout for a child to exit. On Linux through a pidfd, one wake-up when it
    exits or the timeout passes; ``Popen.wait(timeout)`` instead polls the child with growing
    sleeps up to 50 ms, ten wake-ups per 0.2 s wait: about 2 ms of CPU per second of a job, on
    every node, for its whole length (issue 31's launch overhead). Elsewhere, that wait."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.fd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # no pidfd_open (not Linux >= 5.3)
            self.fd = os.pidfd_open(proc.pid)

    def wait(self, timeout: float) -> None:
        """Return when the child has exited (not yet reaped) or ``timeout`` s passed."""
        if self.fd is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
            return
        select.select([self.fd], [], [], timeout)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def run_process(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    on_line: Callable[[str], None],
    timeout: float | None = None,
    cwd: str | None = None,
    grace: float = TERMINATE_GRACE_S,
    should_stop: Callable[[], str | None] | None = None,
    start_deadline: StartDeadline | None = None,
    started: Callable[[int], None] | None = None,
    rank_output: RankOutput | None = None,
    on_state: Callable[[ProcessState], None] | None = None,
) -> ProcessOutcome:
    """Run ``argv`` to completion, streaming its merged output line by line to ``on_line``.

    On timeout or KeyboardInterrupt the process tree gets SIGTERM, then SIGKILL after ``grace``. A
    KeyboardInterrupt is absorbed after the cleanup and reported as ``interrupted``; the caller
    decides what it means. ``should_stop`` is polled a few times a second; a non-empty answer (the
    reason, e.g. "rank 3 on node2 failed") stops the tree the same way, and so does a
    ``start_deadline`` that passes before the process has started any child (torchrun starts its
    workers only after the rendezvous, so this bounds a rendezvous that never ends). ``started``
    is told the process's pid as soon as it runs (a watcher of its ranks). ``rank_output``
    follows output the process writes elsewhere (torchrun's rank log files): its lines join the
    process's own in ``on_line`` and the tail, and it is drained once the process has ended.
    ``on_state`` is told the run's :class:`ProcessState` about once a second (status lines).
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        text=True, encoding="utf-8", errors="replace", bufsize=1,
        preexec_fn=die_with_parent(os.getpid()),
    )
    tracker = DescendantTracker(proc.pid)
    exit_wait = ExitWait(proc)
    if started is not None:
        started(proc.pid)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    emitting = threading.Lock()  # two readers: the process's pipe and the files it writes

    def emit(text: str) -> None:
        with emitting:
            tail.append(text)
            on_line(text)

    def pump() -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            emit(text.rstrip("\n"))

    reader = threading.Thread(target=pump, name="ddpkit-output", daemon=True)
    reader.start()
    if rank_output is not None:
        rank_output.start(emit)
    timed_out = interrupted = False
    stopped: str | None = None
    stopping: list[int] = []  # children alive when the first stop began
    told = start - STATE_EVERY_S
    try:
        while proc.poll() is None:
            tracker.scan()
            if timeout is not None and time.monotonic() - start > timeout:
                timed_out = True
                stopping.append(_terminate(proc, tracker, grace))
                break
            stopped = should_stop() if should_stop is not None else None
            if not stopped and start_deadline is not None and not tracker.seen \
                    and start_deadline.passed(start, time.monotonic()):
                stopped = start_deadline.reason
            if stopped:
                stopping.append(_terminate(proc, tracker, grace))
                break
            if on_state is not None and time.monotonic() - told >= STATE_EVERY_S:
                told = time.monotonic()
                on_state(ProcessState(told - start, bool(tracker.seen),
                                      len(tracker.alive()) if tracker.seen else 0))
            exit_wait.wait(POLL_S)  # returns as soon as torchrun exits, not a tick later
    except KeyboardInterrupt:
        interrupted = True
        stopping.append(_terminate(proc, tracker, grace))
    finally:
        if proc.poll() is None:
            stopping.append(_terminate(proc, tracker, grace))
        proc.wait()
        exit_wait.close()
        if rank_output is not None:
            rank_output.stop()  # the ranks have ended with torchrun: their last lines, at once
        leftovers = _kill_leftovers(tracker)
        reader.join(timeout=5)
    return ProcessOutcome(
        returncode=proc.returncode,
        tail=tuple(tail),
        timed_out=timed_out,
        interrupted=interrupted,
        stopped=stopped,
        duration_s=time.monotonic() - start,
        leftovers_killed=leftovers,
        descendants_seen=len(tracker.seen),
        descendants_stopped=stopping[0] if stopping else 0,
    )


def _terminate(proc: subprocess.Popen[str], tracker: DescendantTracker, grace: float) -> int:
    """SIGTERM the tree (torchrun forwards it to its workers), then SIGKILL what remains.
    Returns how many of its descendants were alive when it began (what was stopped)."""
    tracker.scan()
    alive = tracker.alive()  # counted before any signal: what this stop ends
    _signal_group(proc.pid, signal.SIGTERM)
    for child in alive:
        _signal_pid(child, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        tracker.scan()
        if proc.poll() is not None and not tracker.alive():
            return len(alive)
        time.sleep(0.1)
    _signal_group(proc.pid, signal.SIGKILL)
    for child in tracker.alive():
        _signal_pid(child, signal.SIGKILL)
    return len(alive)


def _kill_leftovers(tracker: DescendantTracker) -> tuple[int, ...]:
    leftovers = tracker.alive()
    for child in leftovers:
        _signal_pid(child, signal.SIGKILL)
    psutil.wait_procs(leftovers, timeout=5)
    return tuple(p.pid for p in leftovers)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _signal_pid(proc: psutil.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(psutil.Error):
        proc.send_signal(sig)
