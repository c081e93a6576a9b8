"""What ``ddpkit stacks`` may read when the run directory is someone else's (issue 22).

``ranks.json`` is written by ``ddpkit launch``, but whoever can write the run directory can
rewrite it, and ``ddpkit stacks`` is often run as root. So:

* :func:`vet` dumps a pid only when the process belongs to the user who owns ``ranks.json``
  (its writer: the job's user), or descends from the run's torchrun when that belongs to them;
  any other pid is refused (``foreign-pid``) and never handed to py-spy.
* :func:`source_line` reads a frame's source line only from a file that the rank's own user may
  read (every directory on the way searchable by it, the file readable by it, checked on what is
  opened, no link swapped in meanwhile), and never from a FIFO or a device.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from ddpkit.file_safety import open_directory, special_kind
from ddpkit.launch.hang.pyspy import Target, failed
from ddpkit.launch.hang.stacks import CODE_CHARS, RankStack
from ddpkit.plain_text import shown

MAX_SOURCE_BYTES = 8 * 1024 * 1024  # a source file larger than this is not read for one line
FOREIGN_FIX = ("give the run directory of a job its owner started: ddpkit stacks reads only the "
               "processes of the user who owns ranks.json, or of that user's torchrun")


@dataclass(frozen=True)
class Reader:
    """Whose rights a file is read with: a process's filesystem uid and its groups."""

    uid: int
    gids: frozenset[int]


def reader_of(pid: int, proc_root: str = "/proc") -> Reader | None:
    """The rights of process ``pid`` (``Uid:``/``Gid:``/``Groups:`` of its status), or None."""
    fields: dict[str, list[str]] = {}
    try:
        with open(f"{proc_root}/{pid}/status", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                fields[key] = rest.split()
        uid = int(fields["Uid"][3])  # real, effective, saved, filesystem: access uses the last
        gids = {int(fields["Gid"][3]), *(int(g) for g in fields.get("Groups", []))}
    except (OSError, KeyError, IndexError, ValueError):
        return None
    return Reader(uid, frozenset(gids))


def _allows(st: os.stat_result, reader: Reader, bit: int) -> bool:
    """``bit`` (4 read, 1 search) granted to ``reader`` by the mode, as the kernel picks the class."""
    if reader.uid == 0:
        return True
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == reader.uid:
        return bool(mode & (bit << 6))
    if st.st_gid in reader.gids:
        return bool(mode & (bit << 3))
    return bool(mode & bit)


def source_line(filename: str, line: int, reader: Reader) -> str:
    """Line ``line`` of ``filename`` as ``reader`` could read it, bounded and without control
    characters; "" when it may not, or there is no such line."""
    if line < 1 or not filename.startswith("/"):
        return ""
    real = Path(os.path.realpath(filename))
    try:
        dir_fd = open_directory(real.parent, follow=lambda st: False,  # a link now: swapped in
                                enter=lambda st: _allows(st, reader, 1))
    except OSError:
        return ""
    try:
        fd = os.open(real.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                     | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return ""
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if special_kind(st.st_mode) is not None or not _allows(st, reader, 4) \
                or st.st_size > MAX_SOURCE_BYTES:
            return ""
        data = os.read(fd, MAX_SOURCE_BYTES)
    except OSError:
        return ""
    finally:
        os.close(fd)
    lines = data.split(b"\n", line)
    if len(lines) < line:
        return ""
    return shown(lines[line - 1].decode("utf-8", errors="replace").strip(), CODE_CHARS).strip()


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
                              f"pid {target.pid} belongs to uid {uids[1]}, not to uid {owner} "
                              "who owns ranks.json, nor descends from the run's torchrun: not "
                              "dumped", FOREIGN_FIX))
    return allowed, refused
