"""The environment allow-list: the engines' variables travel, nothing else does."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddpkit.errors import ConfigError
from ddpkit.launch.envpass import (
    MASK,
    PassedEnv,
    is_allowed,
    load_env_file,
    parse_env_file,
    passed_env,
    read_wire,
    shown,
    to_wire,
)

SHELL = {
    "NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1", "GLOO_SOCKET_TIMEOUT": "30",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "PYTHONPATH": "/src", "PYTHONUNBUFFERED": "1",
    "CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "4",
    "PATH": "/usr/bin", "HOME": "/root", "HF_TOKEN": "secret", "AWS_SECRET_ACCESS_KEY": "s",
    "SSH_AUTH_SOCK": "/tmp/agent", "CUDA_HOME": "/usr/local/cuda", "MASTER_ADDR": "1.2.3.4",
    "LD_PRELOAD": "/evil.so", "XNCCL_X": "1",
}


def test_only_the_allow_list_leaves_this_machine() -> None:
    passed = passed_env(SHELL)
    assert sorted(passed.values) == sorted([
        "CUDA_VISIBLE_DEVICES", "GLOO_SOCKET_TIMEOUT", "NCCL_DEBUG", "NCCL_IB_DISABLE",
        "OMP_NUM_THREADS", "PYTHONPATH", "PYTHONUNBUFFERED", "TORCH_DISTRIBUTED_DEBUG"])
    assert all(passed.sources[k] == "environment" for k in passed.values)
    for secret in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "PATH", "LD_PRELOAD", "SSH_AUTH_SOCK"):
        assert secret not in passed.values


@pytest.mark.parametrize("name, allowed", [
    ("NCCL_SOCKET_IFNAME", True), ("GLOO_DEVICE_TRANSPORT", True), ("TORCH_CPP_LOG_LEVEL", True),
    ("PYTHONHASHSEED", True), ("CUDA_VISIBLE_DEVICES", True), ("OMP_NUM_THREADS", True),
    ("CUDA_HOME", False), ("NCCL", False), ("MY_NCCL_X", False), ("OMP_PROC_BIND", False),
])
def test_is_allowed(name: str, allowed: bool) -> None:
    assert is_allowed(name) is allowed


def test_env_file_then_overrides_win() -> None:
    passed = passed_env({"NCCL_DEBUG": "WARN", "HOME": "/root"},
                        file_values={"NCCL_DEBUG": "INFO", "WANDB_MODE": "offline"},
                        file_path="/job/.ddpkit_env", overrides=[("NCCL_DEBUG", "TRACE")])
    assert passed.values == {"NCCL_DEBUG": "INFO", "WANDB_MODE": "offline"}
    assert passed.sources["WANDB_MODE"] == "/job/.ddpkit_env"
    assert passed.overrides == (("NCCL_DEBUG", "TRACE"),)  # applied last, by each node


def test_env_file_syntax() -> None:
    text = ("# comment\n\nexport A=1\nB = 'two words'\nC=\"x=y\"\nD=\nE=it's\n")
    assert parse_env_file(text, "f") == {"A": "1", "B": "two words", "C": "x=y", "D": "", "E": "it's"}


@pytest.mark.parametrize("line", ["JUST_A_NAME", "1A=b", "A-B=c", "=v", "export"])
def test_a_bad_env_file_line_is_named(line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_env_file(f"A=1\n{line}\n", ".ddpkit_env")
    assert caught.value.error_id == "bad-env-file"
    assert caught.value.message.startswith(".ddpkit_env:2: ")


def test_load_env_file(tmp_path: Path) -> None:
    assert load_env_file(tmp_path / ".ddpkit_env", required=False) is None
    with pytest.raises(ConfigError) as caught:
        load_env_file(tmp_path / "given", required=True)
    assert caught.value.error_id == "env-file-not-found"
    (tmp_path / ".ddpkit_env").write_text("X=1\n")
    assert load_env_file(tmp_path / ".ddpkit_env", required=False) == {"X": "1"}


@pytest.mark.parametrize("item", ["A B=1", "1X=1", "X-Y=1", "=1", "NOEQUALS", "Ü=1"])
def test_env_flag_names_are_validated(item: str) -> None:
    from ddpkit.cli.node.launch_options import env_overrides
    from ddpkit.errors import UsageError

    with pytest.raises(UsageError) as info:
        env_overrides([item])
    assert info.value.error_id == "bad-env"


def test_env_flag_values_pass_as_written() -> None:
    from ddpkit.cli.node.launch_options import env_overrides

    assert env_overrides(["OMP_NUM_THREADS=4", "_X=a=b c", "EMPTY="]) == [
        ("OMP_NUM_THREADS", "4"), ("_X", "a=b c"), ("EMPTY", "")]


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "DB_PASSWORD", "github_token"])
def test_values_whose_names_look_secret_are_masked(name: str) -> None:
    assert shown(name, "v4lue") == MASK and shown("NCCL_DEBUG", "INFO") == "INFO"
    passed = PassedEnv(values={name: "v4lue", "NCCL_DEBUG": "INFO"}, overrides=((name, "v4lue"),))
    assert "v4lue" not in json.dumps(passed.to_dict()) and "INFO" in json.dumps(passed.to_dict())


def _wire(data: bytes) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
        os.close(write_end)
        write_end = -1
        return read_wire(read_end, timeout=2)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_the_env_line_round_trips_and_bad_ones_are_clear_errors() -> None:
    passed = PassedEnv(values={"A": "x y\nz"}, overrides=(("B", "$(rm -rf /)"),))
    assert _wire(to_wire(passed)) == ({"A": "x y\nz"}, (("B", "$(rm -rf /)"),))
    for bad in (b"", b"not json\n", b'{"values": {"BAD NAME": "1"}, "overrides": []}\n',
                b'{"values": {}}'):
        with pytest.raises(ConfigError) as caught:
            _wire(bad)
        assert caught.value.error_id == "bad-env-wire"
