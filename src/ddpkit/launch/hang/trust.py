"""What ``ddpkit stacks`` may read when the run directory is someone else's (issue 22).

``ranks.json`` is written by ``ddpkit launch``, but whoever can write the run directory can
rewrite it, and ``ddpkit stacks`` is often run as root. So:

* :func:`vet` dumps a pid only when the process belongs to the user who owns ``ranks.json``
  (its writer: the job's user), or descends from the run's torchrun when that belongs to them;
  any other pid is refused (``foreign-pid``) and never handed to py-spy.
* :func:`ddpkit.launch.hang.readable_source.source_line` reads a frame's source line only from a
  file that the rank's own user may read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import psutil

from ddpkit.i18n import _
from ddpkit.launch.hang.pyspy import Target, failed
from ddpkit.launch.hang.stacks import RankStack

FOREIGN_FIX = _("give the run directory of a job its owner started: ddpkit stacks reads only "
                "the processes of the user who owns ranks.json, or of that user's torchrun")


def registry_owner(path: Path) -> int:
    """The owner of ``ranks.json`` itself (a link there is not followed): who wrote it."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, f"{path} is not a regular file")
    return st.st_uid


def _uids(pid: int) -> tuple[int, int] | None:
    try:
        uids = psutil.Process(pid).uids()
    except psutil.Error:
        return None
    return uids.real, uids.effective


def _descends_from(pid: int, root: int) -> bool:
    try:
        return any(parent.pid == root for parent in psutil.Process(pid).parents())
    except psutil.Error:
        return False


def vet(targets: Sequence[Target], owner: int,
        torchrun_pid: int | None) -> tuple[list[Target], list[RankStack]]:
    """(the targets that may be dumped, a ``foreign-pid`` stack for each of the others)."""
    root_ok = torchrun_pid is not None and torchrun_pid > 1 and _uids(torchrun_pid) == (owner, owner)
    allowed: list[Target] = []
    refused: list[RankStack] = []
    for target in targets:
        uids = _uids(target.pid)
        if uids is None or uids == (owner, owner) or \
                root_ok and torchrun_pid is not None and _descends_from(target.pid, torchrun_pid):
            allowed.append(target)  # a pid that is gone is reported as exited by the dump
            continue
        refused.append(failed(target, "foreign-pid",
                              _("pid {pid} belongs to uid {uid}, not to uid {owner} who owns "
                                "ranks.json, nor descends from the run's torchrun: not dumped",
                                pid=target.pid, uid=uids[1], owner=owner), FOREIGN_FIX))
    return allowed, refused
