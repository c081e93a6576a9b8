"""A ddpkit run directory as ``doctor --log`` input: the launcher's log and every rank's logs."""

from __future__ import annotations

import glob
import os

LAUNCHER_LOG = "torchrun.log"  # what launch.session writes in every run directory
RANK_LOGS = os.path.join("torchrun", "*", "attempt_*", "*", "*.log")
MAX_FILES = 4096  # a run directory holds a few files per rank; beyond this it is something else


def is_run_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, LAUNCHER_LOG))


def run_dir_logs(path: str) -> list[str]:
    """The launcher log, then the per-rank logs in attempt and local-rank order."""
    ranks = sorted(glob.glob(os.path.join(path, RANK_LOGS)))[:MAX_FILES]
    return [os.path.join(path, LAUNCHER_LOG), *ranks]


def expand(paths: list[str] | tuple[str, ...]) -> list[str]:
    """``paths`` with every ddpkit run directory replaced by its log files (others unchanged)."""
    out: list[str] = []
    for path in paths:
        out.extend(run_dir_logs(path) if path != "-" and is_run_dir(path) else [path])
    return out
