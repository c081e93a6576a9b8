"""Files other users may control (issue 22): the token file, outputs and stacks.json are written
without following another user's symbolic link, and a FIFO given as .ddpkit_env or --token-file
is refused at once instead of waiting for a writer until Ctrl-C."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ddpkit import atomic_file
from ddpkit.atomic_file import replace_file, replacing
from ddpkit.errors import ConfigError, DdpkitError
from ddpkit.file_safety import NotRegularFile, UnsafeLink, open_directory, read_regular
from ddpkit.launch.envpass import load_env_file
from ddpkit.launch.hang.stacks import RankStack
from ddpkit.launch.hang.watcher import STACKS_JSON, StackReport, write_stacks
from ddpkit.launch.join.driver import write_token_file
from ddpkit.launch.join.tokens import JoinToken, parse_token

TOKEN = JoinToken("10.0.0.2", 29400, "0a1b2c3d4e5f", "s3cr3t-s3cr3t-s3cr3t-XYZ_123")
STRANGER = 65534  # nobody: a user other than the caller (these tests lchown as root)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's link needs root")
pytestmark = pytest.mark.timeout(30)


def _stranger_link(link: Path, to: Path) -> None:
    link.symlink_to(to)
    os.lchown(link, STRANGER, STRANGER)


def test_a_symlink_at_the_token_path_is_replaced_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    token = tmp_path / "shared" / "token"
    token.parent.mkdir()
    token.symlink_to(victim)  # what a local user plants where root's master writes the token
    write_token_file(token, TOKEN)
    assert victim.read_text() == "precious\n"
    assert not token.is_symlink() and parse_token(token.read_text()) == TOKEN
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert os.listdir(token.parent) == ["token"]


@needs_root
def test_another_users_symlink_on_the_way_is_refused_and_nothing_is_written(
        tmp_path: Path) -> None:
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    _stranger_link(tmp_path / "runs", elsewhere)
    with pytest.raises(DdpkitError) as caught:
        write_token_file(tmp_path / "runs" / "token", TOKEN)
    assert caught.value.error_id == "token-file-failed"
    assert "symbolic link owned by uid 65534" in caught.value.message
    with pytest.raises(UnsafeLink):
        replace_file(tmp_path / "runs" / "bench.csv", "a,b\n")  # an output (--out/--csv)
    with pytest.raises(UnsafeLink), replacing(tmp_path / "runs" / "plot.png"):  # --plot
        pass
    assert os.listdir(elsewhere) == []


def test_a_link_root_or_the_caller_owns_is_followed_on_the_way(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "runs").symlink_to(real)  # ours
    replace_file(tmp_path / "runs" / "out.json", "{}\n")
    assert (real / "out.json").read_text() == "{}\n"


def test_a_relative_path_with_dot_dot_and_a_chain_of_links_is_walked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "l1").symlink_to("a/b")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    monkeypatch.chdir(tmp_path / "a")
    replace_file(Path("..") / "l2" / ".." / "b" / "x", "1")
    assert (tmp_path / "a" / "b" / "x").read_text() == "1"
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(OSError):
        os.close(open_directory(tmp_path / "loop"))


@needs_root
def test_stacks_json_is_written_atomically_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("{}\n")
    stacks = tmp_path / "run" / "stacks"
    stacks.mkdir(parents=True)
    _stranger_link(stacks / STACKS_JSON, victim)
    report = StackReport("asked", 0, "here", (RankStack(local_rank=0, pid=123, rank=0),),
                         headline="node 0: stacks as asked")
    write_stacks(stacks, report)
    assert victim.read_text() == "{}\n"
    assert not (stacks / STACKS_JSON).is_symlink() and '"ddpkit.stacks/1"' in \
        (stacks / STACKS_JSON).read_text()
    assert not [n for n in os.listdir(stacks) if atomic_file.is_temp_name(n)]
    _stranger_link(tmp_path / "run" / "elsewhere", tmp_path)
    with pytest.raises(UnsafeLink):
        write_stacks(tmp_path / "run" / "elsewhere", report)


def test_the_rename_is_made_durable_by_fsyncing_the_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[bool] = []
    real_fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    replace_file(tmp_path / "x", "1")
    assert synced == [False, True]  # the data, then the directory holding the rename
    synced.clear()
    with replacing(tmp_path / "y") as tmp:
        tmp.write_text("2")
    assert synced == [False, True]


def test_a_fifo_or_a_directory_at_the_target_is_refused_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    with pytest.raises(DdpkitError, match="FIFO"):
        write_token_file(fifo, TOKEN)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(NotRegularFile, match="a directory"):
        replace_file(tmp_path, "x")


def _fifo(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _quick(call: Callable[[], Any]) -> BaseException:
    start = time.monotonic()
    with pytest.raises(BaseException) as caught:  # noqa: PT011 - each caller checks the kind
        call()
    assert time.monotonic() - start < 5, "the FIFO was waited on"
    return caught.value


def test_a_fifo_as_ddpkit_env_is_refused_at_once_with_the_fix(tmp_path: Path) -> None:
    error = _quick(lambda: load_env_file(_fifo(tmp_path, ".ddpkit_env"), required=False))
    assert isinstance(error, ConfigError) and error.error_id == "env-file-unreadable"
    assert "is a FIFO (named pipe), not a regular file" in error.message
    assert "regular file of KEY=VALUE lines" in error.hint


def test_a_fifo_as_the_joins_token_file_is_refused_at_once_with_the_fix(
        tmp_path: Path, run_cli: Callable[..., Any]) -> None:
    fifo = _fifo(tmp_path, "token")
    start = time.monotonic()
    result = run_cli("join", "--token-file", str(fifo))
    assert time.monotonic() - start < 5
    assert result.code == 3 and "error [token-file-unreadable]" in result.err
    assert "FIFO" in result.err and "ddpkit join -" in result.err


def test_read_regular_reads_a_file_up_to_the_limit_and_refuses_a_device(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abcdef")
    assert read_regular(tmp_path / "f", 4) == b"abcd"
    with pytest.raises(NotRegularFile, match="character device"):
        read_regular("/dev/zero", 10)
