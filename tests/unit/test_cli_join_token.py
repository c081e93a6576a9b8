"""Where `ddpkit join` takes its token from, and how the master's --token-file is written."""

from __future__ import annotations

import argparse
import io
import os
import stat
from pathlib import Path

import pytest

from ddpkit.cli.commands.join import token_text
from ddpkit.errors import ConfigError, DdpkitError, UsageError
from ddpkit.launch.join.driver import write_token_file
from ddpkit.launch.join.tokens import TOKEN_ENV, JoinToken, parse_token

TOKEN = JoinToken("10.0.0.2", 29400, "0a1b2c3d4e5f", "s3cr3t-s3cr3t-s3cr3t-XYZ_123")


def _args(token: str | None = None, token_file: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(token=token, token_file=token_file)


def test_the_token_file_is_0600_and_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target = tmp_path / "token"
    (tmp_path / f".token.{os.getpid()}.tmp").symlink_to(victim)  # the old predictable name
    write_token_file(target, TOKEN)
    assert victim.read_text() == "precious\n"
    assert parse_token(target.read_text()) == TOKEN
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".token")) == [
        f".token.{os.getpid()}.tmp"]  # nothing of ours left behind


def test_the_token_comes_from_a_file_stdin_or_the_environment(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "token"
    write_token_file(path, TOKEN)
    assert parse_token(token_text(_args(token_file=str(path)), {})) == TOKEN
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{TOKEN}\n"))
    assert parse_token(token_text(_args(token="-"), {})) == TOKEN
    assert parse_token(token_text(_args(), {TOKEN_ENV: str(TOKEN)})) == TOKEN
    assert token_text(_args(token=str(TOKEN)), {TOKEN_ENV: "ignored"}) == str(TOKEN)


def test_no_token_or_two_tokens_or_an_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        token_text(_args(), {})
    assert caught.value.error_id == "no-token" and "--token-file" in caught.value.hint
    with pytest.raises(UsageError):
        token_text(_args(token=str(TOKEN), token_file="x"), {})
    with pytest.raises(ConfigError) as missing:
        token_text(_args(token_file=str(tmp_path / "absent")), {})
    assert missing.value.error_id == "token-file-unreadable"


def test_a_token_file_that_cannot_be_written_says_so_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(DdpkitError) as caught:
        write_token_file(tmp_path / "absent-dir" / "token", TOKEN)
    assert caught.value.error_id == "token-file-failed" and "--token-file" in caught.value.hint
    assert list(tmp_path.iterdir()) == []
