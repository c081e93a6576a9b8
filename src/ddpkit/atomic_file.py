"""Replace a file so that a reader, or a crash, only ever sees the old or the new content.

The one home of that idea in ddpkit (nccl.conf, the token file, sim state, bench reports and plots,
and the workers' result files all use it). The new bytes go to a temporary file created exclusively
in the target's directory (same filesystem, so the rename is atomic), named
``.<name>.ddpkit-tmp-<pid>-<random>`` so that no reader of ``<name>`` ever opens it and a later
writer can tell a dead writer's leftovers; the data is fsync'd before the rename. Any failure
removes the temporary file and leaves the target as it was. Standard library only: the programs
that run inside ranks use it too. Errors are ``OSError``; callers turn them into their own message.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

TMP_MARK = ".ddpkit-tmp-"


def temp_prefix(target: Path) -> str:
    """What every temporary file of ``target`` is named starting with."""
    return f".{target.name}{TMP_MARK}"


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TMP_MARK in name


def _new_temp(target: Path, suffix: str = "") -> tuple[int, Path]:
    """An exclusively created, empty temporary file next to ``target`` (mode 0600), open."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:  # os.urandom, as secrets.token_hex reads it, without secrets' hmac/hashlib imports
        tmp = target.with_name(f"{temp_prefix(target)}{os.getpid()}-{os.urandom(4).hex()}{suffix}")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue


def write_temp(target: Path, data: bytes, mode: int = 0o644,
               owner: tuple[int, int] | None = None) -> Path:
    """A finished temporary file next to ``target`` holding ``data`` (``mode``, fsync'd, given to
    ``owner`` where this process may), ready to be renamed over ``target``."""
    fd, tmp = _new_temp(target)
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
        unlink_quietly(tmp)
        raise
    os.close(fd)
    return tmp


def replace_file(path: str | os.PathLike[str], data: bytes | str, mode: int = 0o644) -> None:
    """Make ``path`` hold ``data`` (text is UTF-8), atomically; raises ``OSError``."""
    target = Path(path)
    tmp = write_temp(target, data.encode("utf-8") if isinstance(data, str) else data, mode)
    try:
        os.replace(tmp, target)
    except BaseException:
        unlink_quietly(tmp)
        raise


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """For writers that need a file name (a plot library's ``savefig``): yields a fresh temporary
    path ending in ``suffix``; when the block ends without an exception it replaces ``path``,
    otherwise it is removed and ``path`` is untouched."""
    target = Path(path)
    fd, tmp = _new_temp(target, suffix)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        unlink_quietly(tmp)


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
