"""Paths that other users may control, opened without being led elsewhere or made to wait.

Root writing a token file or an output in a shared directory must not follow a symbolic link that
another user planted there (it would replace whatever file the link points at), and a reader of a
small file must not open a FIFO (the open waits for a writer until Ctrl-C) or a device. So:

* :func:`open_directory` reaches a directory one component at a time, relative to the directory
  already open (``openat`` with ``O_NOFOLLOW``), and follows a symbolic link only when ``follow``
  allows it: by default one owned by root or by this process's user. What it returns is the open
  directory, so nothing can be swapped between the check and the use.
* :func:`special_kind` names what a path is when it is not a regular file, and
  :func:`read_regular` reads a small file only when it is one (opened without blocking).

Errors are ``OSError`` subclasses whose ``strerror`` says what was refused and why; callers turn
them into their own message. Standard library only: the programs that run inside ranks write
through :mod:`ddpkit.atomic_file`, which uses this.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

MAX_LINKS = 40  # as the kernel's own limit on links followed in one path (ELOOP)
_DIR_FLAGS = (getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0)
              | getattr(os, "O_CLOEXEC", 0))
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


class UnsafeLink(OSError):
    """A symbolic link on the way that ``follow`` refused (another user's)."""


class NotRegularFile(OSError):
    """A FIFO, device, socket or directory where a regular file was expected."""


def special_kind(mode: int) -> str | None:
    """What a ``st_mode`` is in words ("a FIFO (named pipe)", ...), or None for a regular file
    (and for a symbolic link, which the caller resolves or not)."""
    return next((what for is_kind, what in _KINDS if is_kind(mode)), None)


def trusted_link(st: os.stat_result) -> bool:
    """A link root or this process's user made: the only ones another user cannot have planted."""
    return st.st_uid in (0, os.geteuid())


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def open_directory(path: str | os.PathLike[str], *,
                   follow: Callable[[os.stat_result], bool] = trusted_link,
                   enter: Callable[[os.stat_result], bool] | None = None) -> int:
    """``path`` (a directory) opened component by component; the caller closes the descriptor.

    A symbolic link is followed only when ``follow(its lstat)`` says so, else :class:`UnsafeLink`;
    ``enter(its stat)``, when given, must allow every directory passed through, else
    ``PermissionError``. The descriptor may be ``O_PATH`` (Linux): use it as a ``dir_fd``.
    """
    start = os.path.join(os.getcwd(), os.fspath(path))  # an absolute path stays as it is
    parts, walked, links = _parts(start), "", 0
    fd = os.open("/", _DIR_FLAGS)
    try:
        while parts:
            name = parts.pop(0)
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            shown = f"{walked}/{name}"
            if stat.S_ISLNK(st.st_mode):
                if not follow(st):
                    raise UnsafeLink(errno.EPERM, f"{shown} is a symbolic link owned by uid "
                                     f"{st.st_uid} (neither root nor you): not followed")
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, f"more than {MAX_LINKS} symbolic links in {start}")
                dest = os.readlink(name, dir_fd=fd)
                if dest.startswith("/"):
                    fd, old = os.open("/", _DIR_FLAGS), fd
                    os.close(old)
                    walked = ""
                parts[:0] = _parts(dest)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, f"{shown} is not a directory")
            if enter is not None and not enter(st):
                raise PermissionError(errno.EACCES, f"{shown} may not be entered")
            # O_NOFOLLOW: a link swapped in since the stat above is refused, never followed
            fd, old = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd), fd
            os.close(old)
            walked = shown if name != ".." else os.path.dirname(walked)
        return fd
    except BaseException:
        os.close(fd)
        raise


def fsync_at(dir_fd: int) -> None:
    """Make a rename inside the open directory ``dir_fd`` survive a power cut, where the
    filesystem allows (some refuse fsync on directories; the rename is done either way)."""
    try:
        fd = os.open(".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0), dir_fd=dir_fd)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """:func:`fsync_at` for a directory given by path."""
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError:
        return
    try:
        fsync_at(fd)
    finally:
        os.close(fd)


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``, which must be a regular file (symbolic links to one
    are fine). A FIFO or a device is refused with :class:`NotRegularFile` before a byte is read:
    it is opened without waiting for a writer (``O_NONBLOCK``) and never becomes a terminal."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(errno.EINVAL, f"{path} is {kind}, not a regular file")
        os.set_blocking(fd, True)
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def path_of(dir_fd: int, name: str) -> Path:
    """A path that names ``name`` inside the open directory ``dir_fd`` whatever happens to the
    directory's own path meanwhile (``/proc/self/fd``), for writers that need a file name."""
    return Path(f"/proc/self/fd/{dir_fd}") / name
