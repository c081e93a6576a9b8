"""`nccl-conf set --file` refuses anything but a regular file or a new path before opening it
(issue 11): a FIFO used to block forever, a character device was replaced by a regular file, a
/proc target got a misleading cause; an immutable target now leaves no stray `.bak`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit.errors import ExitCode


def _set(target: Path | str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    return subprocess.run([sys.executable, "-m", "ddpkit", "nccl-conf", "set", "--file", str(target),
                           "NCCL_DEBUG=INFO"], capture_output=True, text=True, timeout=30, env=env)


def _flat(text: str) -> str:
    """Messages wrap at 100 columns: compare them as one line."""
    return " ".join(text.split())


def test_a_fifo_is_refused_at_once_and_left_alone(tmp_path: Path) -> None:
    fifo = tmp_path / "nccl.conf"
    os.mkfifo(fifo)
    done = _set(fifo)  # the 30 s timeout is the hang this used to be
    assert done.returncode == ExitCode.CONFIG, done.stderr
    assert f"error [not-a-file]: {fifo} is a FIFO (named pipe), not a regular file" in _flat(done.stderr)
    assert sorted(os.listdir(tmp_path)) == ["nccl.conf"] and fifo.is_fifo()


def test_a_symlink_to_a_fifo_names_both(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "nccl.conf"
    link.symlink_to(fifo)
    done = _set(link)
    assert done.returncode == ExitCode.CONFIG
    assert f"{fifo} ({link} leads there) is a FIFO" in _flat(done.stderr)


@pytest.mark.root
def test_a_character_device_is_refused_and_stays_a_device(tmp_path: Path) -> None:
    device = tmp_path / "null"
    os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # S_IFCHR: the same device as /dev/null
    done = _set(device)
    assert done.returncode == ExitCode.CONFIG
    assert "is a character device, not a regular file" in _flat(done.stderr)
    assert "wrote" not in done.stdout
    assert device.is_char_device() and sorted(os.listdir(tmp_path)) == ["null"]


def test_proc_names_the_real_cause() -> None:
    done = _set("/proc/self/environ")
    assert done.returncode == ExitCode.CONFIG
    assert "is in /proc, a kernel pseudo-filesystem" in _flat(done.stderr)


@pytest.mark.root
@pytest.mark.parametrize("older_backup", [None, b"NCCL_DEBUG=TRACE\n"])
def test_an_immutable_target_leaves_no_stray_backup(tmp_path: Path, older_backup: bytes | None) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr (e2fsprogs) is not installed")
    target = tmp_path / "nccl.conf"
    target.write_bytes(b"NCCL_DEBUG=WARN\n")
    backup = tmp_path / "nccl.conf.bak"
    if older_backup is not None:
        backup.write_bytes(older_backup)
    lock = subprocess.run(["chattr", "+i", str(target)], capture_output=True, text=True, timeout=30)
    if lock.returncode != 0:
        pytest.skip(f"this filesystem has no immutable flag: {lock.stderr.strip()}")
    try:
        done = _set(target)
        listing = sorted(os.listdir(tmp_path))
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=True, timeout=30)
    assert done.returncode == ExitCode.ENVIRONMENT and "error [permission-denied]" in done.stderr
    assert target.read_bytes() == b"NCCL_DEBUG=WARN\n"
    if older_backup is None:
        assert listing == ["nccl.conf"]
    else:
        assert listing == ["nccl.conf", "nccl.conf.bak"] and backup.read_bytes() == older_backup
