"""Asking ``nvidia-smi`` (which never initialises CUDA) a question: the one home of that probe."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from ddpkit.i18n import _

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SmiAnswer:
    """What ``nvidia-smi ARGS`` said: ``found`` False when the tool is not on PATH; ``error`` is
    empty when it answered with status 0, else the reason in one line."""

    found: bool
    lines: tuple[str, ...] = ()
    error: str = ""


def ask(args: Sequence[str], timeout_s: float = TIMEOUT_S) -> SmiAnswer:
    """Run ``nvidia-smi`` with ``args``, bounded by ``timeout_s``; the stripped, non-empty lines."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return SmiAnswer(found=False)
    shown = " ".join(["nvidia-smi", *args])
    try:
        proc = subprocess.run([tool, *args], capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SmiAnswer(True, (), _("{command} did not answer: {reason}", command=shown,
                                     reason=str(exc)))
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        return SmiAnswer(True, (), said[-1] if said else _("{command} exited with status {status}",
                                                           command=shown, status=proc.returncode))
    return SmiAnswer(True, tuple(line.strip() for line in proc.stdout.splitlines() if line.strip()))
