"""Replace a file so that a reader, or a crash, only ever sees the old or the new content.

The one home of that idea in ddpkit (nccl.conf, the token file, sim state, bench reports and plots,
and the workers' result files all use it). The new bytes go to a temporary file created exclusively
in the target's directory (same filesystem, so the rename is atomic), named
``.<name>.ddpkit-tmp-<pid>-<random>`` so that no reader of ``<name>`` ever opens it and a later
writer can tell a dead writer's leftovers; the data is fsync'd before the rename, and the
directory after it (so the rename survives a power cut). Any failure removes the temporary file
and leaves the target as it was. Standard library only: the programs that run inside ranks use it
too. Errors are ``OSError``; callers turn them into their own message.

Outputs may land where other users can write (a shared run directory, a token file in /tmp):
:func:`replace_file` and :func:`replacing` reach the directory through
:func:`ddpkit.file_safety.open_directory` (a symbolic link on the way is followed only when root
or this user owns it) and work inside that open directory, and they never resolve the final
component: a link there is replaced by the new file, whatever it pointed at stays untouched. A
FIFO, device or directory at the final component is refused (``NotRegularFile``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ddpkit.file_safety import NotRegularFile, fsync_at, open_directory, path_of, special_kind

TMP_MARK = ".ddpkit-tmp-"


def temp_prefix(target: Path) -> str:
    """What every temporary file of ``target`` is named starting with."""
    return f".{target.name}{TMP_MARK}"


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TMP_MARK in name


def _new_temp(target: Path, suffix: str = "", dir_fd: int | None = None) -> tuple[int, str]:
    """An exclusively created, empty temporary file next to ``target`` (mode 0600), open; its
    name (inside ``dir_fd`` when given, else a path)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:  # os.urandom, as secrets.token_hex reads it, without secrets' hmac/hashlib imports
        name = f"{temp_prefix(target)}{os.getpid()}-{os.urandom(4).hex()}{suffix}"
        tmp = name if dir_fd is not None else str(target.with_name(name))
        try:
            return os.open(tmp, flags, 0o600, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue


def write_temp(target: Path, data: bytes, mode: int = 0o644,
               owner: tuple[int, int] | None = None) -> Path:
    """A finished temporary file next to ``target`` holding ``data`` (``mode``, fsync'd, given to
    ``owner`` where this process may), ready to be renamed over ``target``."""
    return Path(_write_temp(target, data, mode, owner, None))


def _write_temp(target: Path, data: bytes, mode: int, owner: tuple[int, int] | None,
                dir_fd: int | None) -> str:
    fd, tmp = _new_temp(target, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        if owner is not None and hasattr(os, "fchown"):
            with contextlib.suppress(OSError):  # not root: the file stays ours
                os.fchown(fd, *owner)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp, dir_fd)
        raise
    os.close(fd)
    return tmp


def _open_parent(target: Path) -> int:
    """The target's directory, open (see the module's docstring); the final component checked."""
    if target.name in ("", ".", ".."):
        raise IsADirectoryError(errno.EISDIR, f"{target} names a directory, not a file")
    dir_fd = open_directory(target.parent)
    try:
        st = os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return dir_fd
    except BaseException:
        os.close(dir_fd)
        raise
    kind = special_kind(st.st_mode)
    if kind is not None:
        os.close(dir_fd)
        raise NotRegularFile(errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL,
                             f"{target} is {kind}, not a regular file")
    return dir_fd


def replace_file(path: str | os.PathLike[str], data: bytes | str, mode: int = 0o644) -> None:
    """Make ``path`` hold ``data`` (text is UTF-8), atomically; raises ``OSError``."""
    target = Path(path)
    dir_fd = _open_parent(target)
    try:
        tmp = _write_temp(target, data.encode("utf-8") if isinstance(data, str) else data, mode,
                          None, dir_fd)
        try:
            os.replace(tmp, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            _unlink_quietly(tmp, dir_fd)
            raise
        fsync_at(dir_fd)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """For writers that need a file name (a plot library's ``savefig``): yields a fresh temporary
    path ending in ``suffix`` (inside the directory opened once, see the module's docstring);
    when the block ends without an exception it replaces ``path``, otherwise it is removed and
    ``path`` is untouched."""
    target = Path(path)
    dir_fd = _open_parent(target)
    try:
        fd, tmp = _new_temp(target, suffix, dir_fd)
        try:
            yield path_of(dir_fd, tmp) if os.path.isdir(path_of(dir_fd, ".")) else \
                target.with_name(tmp)
            os.fchmod(fd, 0o644)  # the file this block created, never what its name leads to now
            os.fsync(fd)
            os.replace(tmp, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            fsync_at(dir_fd)
        finally:
            os.close(fd)
            _unlink_quietly(tmp, dir_fd)
    finally:
        os.close(dir_fd)


def _unlink_quietly(name: str, dir_fd: int | None) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
