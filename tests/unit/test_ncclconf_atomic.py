"""The atomic write: content, mode 0644, .bak, symlinks, stale temporaries, failure cleanup.

Killing a real writer mid-write is in tests/integration/test_ncclconf_write.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit.errors import ConfigError
from ddpkit.ncclconf.atomic import is_temp_name, remove_stale_temps, temp_prefix, write_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _leftovers(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if is_temp_name(n))


def test_creates_a_new_file_with_mode_0644_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "nccl.conf"
    old_umask = os.umask(0o077)
    try:
        result = write_atomic(target, b"NCCL_DEBUG=INFO\n")
    finally:
        os.umask(old_umask)
    assert target.read_bytes() == b"NCCL_DEBUG=INFO\n"
    assert _mode(target) == 0o644
    assert result.created and result.backup is None
    assert not (tmp_path / "nccl.conf.bak").exists()
    assert _leftovers(tmp_path) == []


def test_replacing_keeps_the_previous_content_as_bak(tmp_path: Path) -> None:
    target = tmp_path / "nccl.conf"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o600)
    result = write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert _mode(target) == 0o644
    assert result.backup == tmp_path / "nccl.conf.bak"
    assert result.backup.read_bytes() == b"old\n"
    assert not result.created
    write_atomic(target, b"newer\n")
    assert (tmp_path / "nccl.conf.bak").read_bytes() == b"new\n"
    assert _leftovers(tmp_path) == []


def test_a_new_inode_replaces_the_old_one(tmp_path: Path) -> None:
    # A reader holding the old file open keeps reading the complete old content.
    target = tmp_path / "nccl.conf"
    target.write_bytes(b"old content\n")
    with open(target, "rb") as reader:
        write_atomic(target, b"new content\n")
        assert reader.read() == b"old content\n"
    assert target.read_bytes() == b"new content\n"


def test_a_symlinked_target_stays_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.conf"
    real.write_bytes(b"old\n")
    link = tmp_path / "nccl.conf"
    link.symlink_to(real)
    result = write_atomic(link, b"new\n")
    assert link.is_symlink()
    assert real.read_bytes() == b"new\n"
    assert result.path == real
    assert (tmp_path / "real.conf.bak").read_bytes() == b"old\n"


def test_missing_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        write_atomic(tmp_path / "no" / "such" / "nccl.conf", b"x")
    assert info.value.error_id == "conf-dir-missing"


def test_a_failure_before_the_rename_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "nccl.conf"
    target.write_bytes(b"old\n")
    seen: list[Path] = []

    def explode(tmp: Path) -> None:
        seen.append(tmp)
        assert tmp.read_bytes() == b"new\n"  # complete and flushed before the rename
        assert tmp.parent == target.parent  # same directory: the rename is atomic
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_atomic(target, b"new\n", before_replace=explode)
    assert target.read_bytes() == b"old\n"
    assert seen and not seen[0].exists()
    assert _leftovers(tmp_path) == []


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "nccl.conf"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60, check=True)
    dead_pid = int(dead.stdout)
    stale = tmp_path / f"{temp_prefix(target)}{dead_pid}-deadbeef"
    stale.write_bytes(b"half a fi")
    alive = tmp_path / f"{temp_prefix(target)}{os.getpid()}-cafecafe"
    alive.write_bytes(b"in progress")
    other = tmp_path / f"{temp_prefix(tmp_path / 'other.conf')}{dead_pid}-00000000"
    other.write_bytes(b"not ours")
    assert remove_stale_temps(target) == (stale,)
    assert not stale.exists() and alive.exists() and other.exists()
    alive.unlink()


def test_temp_names_are_never_the_target_name(tmp_path: Path) -> None:
    target = tmp_path / "nccl.conf"
    assert temp_prefix(target).startswith(".nccl.conf")
    assert is_temp_name(f"{temp_prefix(target)}123-abcd")
    assert not is_temp_name("nccl.conf") and not is_temp_name("nccl.conf.bak")
