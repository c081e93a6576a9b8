"""Replace a small file so that a reader (or a crash) only ever sees the old or the new content.

The new bytes go to a temporary file in the same directory (same filesystem, so the rename is
atomic), are flushed and fsync'd, the previous content is kept as ``<name>.bak`` (written the same
way), the temporary file is renamed over the target, and the directory is fsync'd so the rename
itself survives a power cut. A process killed at any point leaves the target intact; what it can
leave is a temporary file named ``.<name>.ddpkit-tmp-<pid>-<random>`` (and one for the backup,
``.<name>.bak.ddpkit-tmp-...``), which no reader of ``<name>`` ever opens, and which the next write
to the same file removes once its writer is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ddpkit import atomic_file
from ddpkit.atomic_file import is_temp_name, temp_prefix
from ddpkit.errors import ConfigError, EnvironmentProblem
from ddpkit.file_safety import fsync_directory, special_kind
from ddpkit.i18n import _

BACKUP_SUFFIX = ".bak"
__all__ = ["BACKUP_SUFFIX", "WriteResult", "check_target", "is_temp_name", "remove_stale_temps",
           "temp_prefix", "write_atomic"]

_DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}


@dataclass(frozen=True)
class WriteResult:
    path: Path  # the file written (symlinks resolved)
    backup: Path | None  # the copy of the previous content, if there was one
    created: bool  # True when the file did not exist before


def write_atomic(
    path: Path,
    data: bytes,
    *,
    mode: int = 0o644,
    backup: bool = True,
    keep_owner: bool = True,
    before_replace: Callable[[Path], None] | None = None,
) -> WriteResult:
    """Atomically make ``path`` contain ``data`` with permissions ``mode``; keep a ``.bak``.

    ``keep_owner`` gives the new file the old one's owner (root editing a user's file); a secret
    (``keep_owner=False``) stays owned by its writer whoever owned the old file.
    ``before_replace`` is called with the finished temporary file just before it is renamed over
    ``path`` (tests use it to kill the writer at the worst moment). Raises
    :class:`EnvironmentProblem` ``permission-denied`` when the directory or file cannot be written
    (no permission, read-only filesystem, immutable file) and leaves everything as it was.
    """
    check_target(path)
    target = Path(os.path.realpath(path))
    directory = target.parent
    if not directory.is_dir():
        raise ConfigError(
            "conf-dir-missing",
            _("cannot write {path}: directory {directory} does not exist", path=str(path),
              directory=str(directory)),
            _("create {directory} first, or choose another file", directory=str(directory)),
        )
    backup_target = target.with_name(target.name + BACKUP_SUFFIX)
    remove_stale_temps(target)
    remove_stale_temps(backup_target)
    previous = _read_existing(target, path)
    created = previous is None
    owner = _owner(target) if keep_owner else None
    backup_path: Path | None = None
    older_backup = _read_backup(backup_target) if backup and previous is not None else None
    tmp = _write_temp(target, data, mode, owner, path)
    try:
        if backup and previous is not None:
            backup_path = backup_target
            bak_tmp = _write_temp(backup_path, previous, mode, owner, path)
            try:
                os.replace(bak_tmp, backup_path)
            except BaseException:
                atomic_file.unlink_quietly(bak_tmp)
                raise
        if before_replace is not None:
            before_replace(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            # The target refused (immutable, append-only): the backup written for it must not stay.
            if backup_path is not None:
                _restore_backup(backup_path, older_backup, mode, owner, path)
            raise
    except OSError as exc:
        atomic_file.unlink_quietly(tmp)
        raise _write_error(path, exc) from exc
    except BaseException:
        atomic_file.unlink_quietly(tmp)
        raise
    fsync_directory(directory)
    return WriteResult(target, backup_path, created)


def remove_stale_temps(target: Path) -> tuple[Path, ...]:
    """Delete temporaries of ``target`` whose writer process no longer exists; return them."""
    removed = []
    prefix = temp_prefix(target)
    try:
        names = sorted(os.listdir(target.parent))
    except OSError:
        return ()
    for name in names:
        if not name.startswith(prefix):
            continue
        pid_text = name[len(prefix):].split("-", 1)[0]
        if pid_text.isdigit() and _process_exists(int(pid_text)):
            continue
        candidate = target.parent / name
        try:
            candidate.unlink()
            removed.append(candidate)
        except OSError:
            pass
    return tuple(removed)


def _process_exists(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_existing(target: Path, shown: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _write_error(shown, exc) from exc


_PSEUDO_FILESYSTEMS = ("/proc", "/sys", "/dev")


# file_safety.special_kind's words (that module is standard library only), for the user.
_KIND_TEXT = {"a FIFO (named pipe)": _("a FIFO (named pipe)"),
              "a character device": _("a character device"), "a block device": _("a block device"),
              "a socket": _("a socket"), "a directory": _("a directory")}


def check_target(path: Path) -> None:
    """Refuse anything but a regular file or a new path, before anything is opened.

    Opening a FIFO blocks until a writer comes; renaming over a device replaces the device node;
    /proc and /sys files are the kernel's. Each gets ``not-a-file`` naming what the path really is.
    """
    real = os.path.realpath(path)
    shown = (_("{real} ({path} leads there)", real=real, path=str(path))
             if str(real) != str(path) else real)
    for root in _PSEUDO_FILESYSTEMS:
        if real == root or real.startswith(root + "/"):
            raise ConfigError(
                "not-a-file", _("{path} is in {root}, a kernel pseudo-filesystem, not a file NCCL "
                                "reads settings from", path=shown, root=root),
                _("choose a regular file: /etc/nccl.conf, ~/.nccl.conf (--user) or a path "
                  "NCCL_CONF_FILE names"), details={"path": str(path)})
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return  # a new file: fine
    except OSError:
        return  # reading or writing will report it with its own cause
    what = special_kind(st.st_mode)
    if what is not None:
        raise ConfigError(
            "not-a-file", _("{path} is {what}, not a regular file", path=shown,
                            what=_KIND_TEXT.get(what, what)),
            _("give the path of a regular file (or of a new one) for nccl.conf"),
            details={"path": str(path)})


def _read_backup(backup_target: Path) -> bytes | None:
    try:
        return backup_target.read_bytes() if backup_target.is_file() else None
    except OSError:
        return None


def _restore_backup(backup_path: Path, older: bytes | None, mode: int,
                    owner: tuple[int, int] | None, shown: Path) -> None:
    """Put the ``.bak`` back as it was before this write: the older copy, or none at all."""
    if older is None:
        atomic_file.unlink_quietly(backup_path)
        return
    with contextlib.suppress(BaseException):
        restored = _write_temp(backup_path, older, mode, owner, shown)
        try:
            os.replace(restored, backup_path)
        except OSError:
            atomic_file.unlink_quietly(restored)


def _owner(target: Path) -> tuple[int, int] | None:
    try:
        st = target.stat()
    except OSError:
        return None
    return (st.st_uid, st.st_gid) if stat.S_ISREG(st.st_mode) else None


def _write_temp(
    target: Path, data: bytes, mode: int, owner: tuple[int, int] | None, shown: Path
) -> Path:
    try:
        return atomic_file.write_temp(target, data, mode, owner)
    except OSError as exc:
        raise _write_error(shown, exc) from exc


def _write_error(path: Path, exc: OSError) -> EnvironmentProblem:
    reason = exc.strerror or str(exc)
    if exc.errno in _DENIED:
        return EnvironmentProblem(
            "permission-denied",
            _("cannot write {path}: {reason}", path=str(path), reason=reason),
            _("write your own file with `--user` (~/.nccl.conf) or `--file PATH`, "
              "or rerun as root (sudo)"),
            details={"path": str(path), "errno": exc.errno},
        )
    if exc.errno == errno.ENOSPC:
        return EnvironmentProblem(
            "disk-full", _("cannot write {path}: {reason}", path=str(path), reason=reason),
            _("free some space and retry"),
            details={"path": str(path), "errno": exc.errno},
        )
    return EnvironmentProblem(
        "write-failed", _("cannot write {path}: {reason}", path=str(path), reason=reason),
        _("check the path and retry"),
        details={"path": str(path), "errno": exc.errno},
    )
