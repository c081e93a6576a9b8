"""``ddpkit doctor --log``: read log files (or stdin) and diagnose them. No torch import."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import BinaryIO

from ddpkit.doctor import run_dir
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.logscan import scan
from ddpkit.doctor.rules import Diagnosis
from ddpkit.errors import ConfigError

STDIN_NAME = "<stdin>"


def _unreadable(path: str, reason: str) -> ConfigError:
    return ConfigError(
        "log-unreadable",
        f"cannot read log file {path}: {reason}",
        "pass a readable file (or - for stdin); check the path and its permissions",
        details={"path": path},
    )


def check_readable(path: str) -> None:
    """Raise ``log-unreadable`` unless ``path`` is a file this process can open for reading."""
    if os.path.isdir(path):
        raise _unreadable(path, "it is a directory, and not a ddpkit run directory (no "
                                f"{run_dir.LAUNCHER_LOG} in it)")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise _unreadable(path, exc.strerror or str(exc)) from exc


def diagnose(paths: Sequence[str], stdin: BinaryIO | None = None) -> list[Finding]:
    """Findings for the logs at ``paths`` (``-`` is ``stdin``), most likely root cause first.

    Every path is checked before any is read, so a typo fails at once; the files are then
    streamed one after another in constant memory and correlated at the end.
    """
    from ddpkit.doctor import stacks_input

    stack_files, paths = stacks_input.split(list(paths))
    hung = stacks_input.finding(stack_files)
    if stack_files and not paths:
        return [hung] if hung is not None else []
    paths = run_dir.expand(list(paths))
    for path in paths:
        if path != "-":
            check_readable(path)
    diagnosis = Diagnosis()
    for path in paths:
        if path == "-":
            if stdin is None:
                raise _unreadable(path, "no standard input")
            _feed(diagnosis, stdin, STDIN_NAME, path)
            continue
        try:
            with open(path, "rb") as stream:
                _feed(diagnosis, stream, path, path)
        except OSError as exc:
            raise _unreadable(path, exc.strerror or str(exc)) from exc
    found = diagnosis.findings()
    if hung is not None:  # the stacks say where each rank was: the most direct evidence
        found = [hung, *(f for f in found if f.id != "no-failure")]
    return found


def _feed(diagnosis: Diagnosis, stream: BinaryIO, name: str, path: str) -> None:
    try:
        for event in scan(stream, name):
            diagnosis.feed(event)
    except OSError as exc:
        raise _unreadable(path, exc.strerror or str(exc)) from exc
