"""A frame's source line, read only with the rights of the rank's own user (issue 22): every
directory on the way searchable by it, the file readable by it, checked on what is opened, no
link swapped in meanwhile, and never a FIFO or a device. A root ``ddpkit stacks`` must not print a
file that the rank names but may not read."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ddpkit.file_safety import open_directory, special_kind
from ddpkit.launch.hang.stacks import CODE_CHARS
from ddpkit.plain_text import shown

MAX_SOURCE_BYTES = 8 * 1024 * 1024  # a source file larger than this is not read for one line


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
