"""One job's run directory: its name, claiming it for one job, and the launcher log in it.

Every file in a run directory belongs to one job: jobs started in the same second from the same
directory get different names (the launching process's id is part of the default name), and a job
claims its directory by creating its launcher log exclusively, so a second job given the same
directory is refused instead of mixing its ranks' output, its ``ranks.json`` and its summary with
the first's.

The launcher log is a copy of what the ranks and torchrun print: a disk that fills up while the job
runs stops the copy (:class:`LauncherLog`), never the job or its result.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path
from typing import TextIO

from ddpkit.doctor.log.run_dir import LAUNCHER_LOG
from ddpkit.errors import EnvironmentProblem
from ddpkit.i18n import _
from ddpkit.launch.config import FLIGHT_RECORDER_DIR, LaunchConfig


def default_run_dir(config: LaunchConfig, cwd: Path, pid: int | None = None) -> Path:
    """``./ddpkit-runs/<time>-node<R>-<pid>``: the time for people, the process id so that jobs
    started in the same second from one directory never share it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return cwd / "ddpkit-runs" / f"{stamp}-node{config.node_rank}-{pid or os.getpid()}"


def claim(run_dir: Path, *, flight_recorder: bool) -> None:
    """Create ``run_dir`` and its empty launcher log for this job alone: ``run-dir-in-use`` when
    another job (or an earlier run) already wrote its launcher log there."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if flight_recorder:
            (run_dir / FLIGHT_RECORDER_DIR).mkdir(exist_ok=True)
        fd = os.open(run_dir / LAUNCHER_LOG,
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o644)
    except FileExistsError as exc:
        raise EnvironmentProblem(
            "run-dir-in-use",
            _("the run directory {path} already holds another job's output ({log} exists); "
              "two jobs never share one", path=str(run_dir), log=LAUNCHER_LOG),
            _("pass a new --run-dir PATH (or leave it out: every job then gets its own "
              "directory), or move the old one away"),
        ) from exc
    except OSError as exc:
        raise EnvironmentProblem(
            "run-dir-unwritable", _("cannot create the run directory {path}: {why}",
                                    path=str(run_dir), why=str(exc.strerror)),
            _("run from a writable directory or pass --run-dir PATH"),
        ) from exc
    os.close(fd)


class LauncherLog:
    """The launcher log, written a line at a time. A write that fails (a full disk, a quota, an
    I/O error) ends the copy and is remembered in :attr:`problem`: the job runs on, its output
    still reaches the terminal, and the failure is said once, as a warning, after it ends."""

    def __init__(self, path: Path, *, append: bool) -> None:
        self.path = path
        self.lines = 0  # written whole (flushed or still buffered)
        self.problem: OSError | None = None
        self._file: TextIO | None = None
        try:
            # line by line, so what fits on a disk that fills up later is there
            self._file = open(path, "a" if append else "w", encoding="utf-8",  # noqa: SIM115
                              buffering=1)
        except OSError as exc:
            self.problem = exc

    def write(self, line: str) -> None:
        if self._file is None:
            return
        try:
            self._file.write(line + "\n")
            self.lines += 1
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._file.close()
        except OSError as exc:
            self._fail(exc)
        self._file = None

    def _fail(self, exc: OSError) -> None:
        self.problem = self.problem or exc
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):  # the buffer's flush fails again; the fd closes
                file.close()

    def warning(self, kept: str) -> str | None:
        """What could not be written and what was kept (``kept``: where the ranks' own logs are),
        or None when every line was written."""
        if self.problem is None:
            return None
        why = self.problem.strerror or str(self.problem)
        size = _size(self.path)
        if self.problem.errno in (errno.ENOSPC, errno.EDQUOT):
            return _("the disk under {path} is full ({why}): {name} stops after {size} bytes; the "
                     "job ran on and its result stands; the ranks' own logs are in {kept}",
                     path=str(self.path.parent), why=why, name=self.path.name, size=size,
                     kept=kept)
        return _("{name} in {path} could not be written ({why}): it stops after {size} bytes; "
                 "the job ran on and its result stands; the ranks' own logs are in {kept}",
                 path=str(self.path.parent), why=why, name=self.path.name, size=size, kept=kept)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
