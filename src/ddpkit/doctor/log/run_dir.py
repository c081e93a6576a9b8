"""A ddpkit run directory as ``doctor --log`` input: the launcher's log and every rank's logs."""

from __future__ import annotations

import glob
import os
import re
import stat
from collections.abc import Sequence

LAUNCHER_LOG = "torchrun.log"  # what launch.session writes in every run directory
RANK_LOGS = os.path.join("torchrun", "*", "attempt_*", "*", "*.log")
MAX_FILES = 4096  # a run directory holds a few files per rank; beyond this it is something else


def is_run_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, LAUNCHER_LOG))


def run_dir_logs(path: str) -> list[str]:
    """The launcher log, then the per-rank logs in attempt and local-rank order."""
    ranks = sorted(glob.glob(os.path.join(path, RANK_LOGS)))[:MAX_FILES]
    return [os.path.join(path, LAUNCHER_LOG), *ranks]


# torchrun's own --log-dir (torch/distributed/elastic/multiprocessing/api.py, DefaultLogsSpecs):
# a folder per start of the agent, "<rdzv_run_id>_<random>" (tempfile.mkdtemp), holding
# attempt_<restart>/<local rank>/stdout.log, stderr.log and error.json; attempt_<restart>/
# filtered_std{out,err}.log repeat some ranks' lines of those (--filter-local-ranks) and are left
START_RANK_LOGS = os.path.join("attempt_*", "*", "std*.log")
_RANK_LOG = re.compile(r"attempt_(\d+)[/\\](\d+)[/\\]std(?:out|err)\.log$")


def start_logs(start: str) -> list[str]:
    """The rank logs of one start of torchrun's agent under its --log-dir, in attempt, then
    local-rank order ([] when ``start`` holds none)."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(start), START_RANK_LOGS)):
        match = _RANK_LOG.search(path)
        if match is not None:
            found.append((int(match.group(1)), int(match.group(2)), path))
    return [path for *_, path in sorted(found)][:MAX_FILES]


def attempt_of(path: str) -> int | None:
    """The attempt (torchrun's restart count) whose rank log ``path`` is, in the layout of a
    start under torchrun's --log-dir; None for any other file."""
    match = _RANK_LOG.search(path)
    return int(match.group(1)) if match is not None else None


def attempt_folder(path: str) -> str | None:
    """The attempt folder (``<start>/attempt_<N>``) a rank log of torchrun's --log-dir is in;
    None for any other file."""
    return os.path.dirname(os.path.dirname(path)) if _RANK_LOG.search(path) else None


def silent_rank_logs(paths: Sequence[str]) -> dict[str, int]:
    """Of ``paths``, the ranks' stderr.log files of a torchrun start that are empty while another
    rank's stderr.log in the same attempt is not, each with its local rank: a process whose
    stderr is empty printed no Python error before it ended (a start where every stderr is empty
    says nothing: the ranks printed nothing at all, or stderr was not redirected)."""
    sizes: dict[str, dict[str, tuple[int, int]]] = {}
    for path in paths:
        match = _RANK_LOG.search(path)
        if match is None or not path.endswith("stderr.log"):
            continue
        try:
            info = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue  # (a FIFO has no size to read silence from: it is read, with its bound)
        sizes.setdefault(attempt_folder(path) or "", {})[path] = (int(match.group(2)),
                                                                  info.st_size)
    return {path: rank for files in sizes.values() if any(size for _, size in files.values())
            for path, (rank, size) in files.items() if size == 0}


def newest_start(log_dir: str) -> str | None:
    """The folder of the last start of torchrun's agent under its --log-dir (each start, a
    job-wide restart included, makes its own); None when it has none."""
    starts = [d for d in glob.glob(os.path.join(glob.escape(log_dir), "*")) if os.path.isdir(d)]
    return max(starts, key=mtime) if starts else None


def torchrun_log_dir_logs(path: str) -> list[str]:
    """The rank logs of torchrun's --log-dir ``path`` (of its last start), or of one start's
    folder; [] when ``path`` is neither."""
    if not os.path.isdir(path):
        return []
    here = start_logs(path)
    if here:
        return here
    starts = {d: logs for d in glob.glob(os.path.join(glob.escape(path), "*"))
              if (logs := start_logs(d))}
    return starts[max(starts, key=mtime)] if starts else []


def mtime(path: str) -> float:
    """When ``path`` was last written (0 when it cannot be read)."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def expand(paths: list[str] | tuple[str, ...]) -> list[str]:
    """``paths`` with every ddpkit run directory replaced by its log files (others unchanged)."""
    out: list[str] = []
    for path in paths:
        out.extend(run_dir_logs(path) if path != "-" and is_run_dir(path) else [path])
    return out
