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
    assert parse_env_file(text, "f").values == {"A": "1", "B": "two words", "C": "x=y", "D": "",
                                                "E": "it's"}


@pytest.mark.parametrize("line", ["JUST_A_NAME", "1A=b", "A-B=c", "=v", "export", "*", "HF_*=1",
                                  "1HF_*", "HF-*"])
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
    loaded = load_env_file(tmp_path / ".ddpkit_env", required=False)
    assert loaded is not None and loaded.values == {"X": "1"}


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


def test_a_prefix_line_forwards_a_family_from_this_shell() -> None:
    from ddpkit.launch.envpass import EnvFile

    loaded = parse_env_file("# frameworks\nACCELERATE_*\nexport WANDB_*\nX=1\nACCELERATE_*\n", "f")
    assert loaded == EnvFile({"X": "1"}, ("ACCELERATE_", "WANDB_"))
    shell = {"ACCELERATE_USE_CPU": "true", "ACCELERATE_MIXED_PRECISION": "no",
             "WANDB_MODE": "offline", "HF_HOME": "/cache", "PATH": "/usr/bin", "ACCELERATE": "x"}
    passed = passed_env(shell, file_values={"WANDB_MODE": "disabled"}, file_path="/j/.ddpkit_env",
                        file_prefixes=loaded.prefixes)
    assert passed.values == {"ACCELERATE_USE_CPU": "true", "ACCELERATE_MIXED_PRECISION": "no",
                             "WANDB_MODE": "disabled"}  # the file's own value wins
    assert passed.sources["ACCELERATE_USE_CPU"] == "environment, ACCELERATE_* in /j/.ddpkit_env"


def test_what_frameworks_read_and_will_not_travel_is_named_in_one_warning() -> None:
    from ddpkit.launch.envpass import untravelled, untravelled_warning

    shell = {"ACCELERATE_USE_CPU": "true", "HF_TOKEN": "hf_secret", "WANDB_PROJECT": "p",
             "TRANSFORMERS_CACHE": "/c", "LOCAL_RANK": "0", "NODE_RANK": "0", "PATH": "/usr/bin",
             "NCCL_DEBUG": "INFO", "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000",
             "DEEPSPEED_X": "1"}
    passed = passed_env(shell, overrides=[("DEEPSPEED_X", "1")])
    found = untravelled(shell, passed)
    assert found.framework == ("ACCELERATE_USE_CPU", "HF_TOKEN", "MLFLOW_TRACKING_URI",
                               "TRANSFORMERS_CACHE", "WANDB_PROJECT")
    assert found.launch == ("LOCAL_RANK", "NODE_RANK")
    warning = untravelled_warning(found)
    assert warning is not None
    assert "ACCELERATE_USE_CPU, HF_TOKEN, MLFLOW_TRACKING_URI" in warning
    assert "hf_secret" not in warning and "NCCL_DEBUG" not in warning and "PATH" not in warning
    assert "--env NAME=VALUE" in warning and ".ddpkit_env" in warning
    assert "`ACCELERATE_*` or `HF_*`" in warning
    assert "LOCAL_RANK, NODE_RANK set here: launch variables are never sent" in warning
    # once sent (a family line, a value), nothing is left to say
    sent = passed_env(shell, file_prefixes=FAMILIES, file_values={"TRANSFORMERS_CACHE": "/c"})
    assert untravelled_warning(untravelled({k: v for k, v in shell.items()
                                            if not k.endswith("_RANK")}, sent)) is None


FAMILIES = ("ACCELERATE_", "HF_", "WANDB_", "MLFLOW_", "DEEPSPEED_")


def test_a_long_list_is_cut_and_counted() -> None:
    from ddpkit.launch.envpass import untravelled, untravelled_warning

    shell = {f"HF_V{i:02d}": "1" for i in range(11)}
    warning = untravelled_warning(untravelled(shell, passed_env(shell)))
    assert warning is not None and "HF_V07 and 3 more" in warning and "HF_V08" not in warning


@pytest.mark.parametrize("mode", [("--hosts", "10.0.0.2,10.0.0.3"), ("--nnodes", "2", "--ifname", "lo")])
def test_ssh_and_token_jobs_warn_before_they_start(run_cli, tmp_path: Path, monkeypatch,  # type: ignore[no-untyped-def]
                                                   mode: tuple[str, ...]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / ".ddpkit_env").write_text("WANDB_*\n")
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    result = run_cli("launch", *mode, "--dry-run", "train.py")
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if "not sent to the other nodes" in line]
    assert len(warnings) == 1 and "ACCELERATE_USE_CPU" in warnings[0]
    assert "WANDB_MODE" not in warnings[0]  # forwarded by the family line


@pytest.mark.parametrize("mode", [("--hosts", "10.0.0.2,10.0.0.3"), ("--nnodes", "2", "--ifname", "lo")])
def test_a_variable_the_script_reads_set_only_here_is_warned_before_the_job(  # type: ignore[no-untyped-def]
        run_cli, tmp_path: Path, monkeypatch, mode: tuple[str, ...]) -> None:
    """`env STEPS=60 ddpkit launch ...`: the workers' ranks would run with the default (issue 31;
    STEPS is no framework's, so the framework warning stayed silent)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("import os\nsteps = int(os.environ.get('STEPS', 10))\n"
                                       "lr = os.getenv(\"LR\")\nhome = os.environ['HOME']\n")
    monkeypatch.setenv("STEPS", "60")
    monkeypatch.delenv("LR", raising=False)
    result = run_cli("launch", *mode, "--dry-run", "train.py")
    assert result.code == 0, result.err
    said = " ".join(result.err.split())
    assert "read by the script, but not sent to the other nodes: STEPS" in said, said
    assert "LR" not in said.split("STEPS", 1)[1].split(")")[0]  # not set here: nothing to send
    result = run_cli("launch", *mode, "--dry-run", "--env", "STEPS=60", "train.py")
    assert "read by the script" not in result.err  # sent: nothing to say


def test_environment_names_are_read_from_the_source() -> None:
    from ddpkit.launch.torchrun.entry_file import environment_names

    source = (b"import os\nfrom os import environ\nA = os.environ['STEPS']\n"
              b"B = os.environ.get(\"LR\", 1)\nC = os.getenv('BATCH')\n"
              b"environ.setdefault('SEED', '0')\nD = environ[ 'STEPS' ]\nE = os.environ\n"
              b"F = os.environ.get(name)\n")
    assert environment_names(source) == ("STEPS", "LR", "BATCH", "SEED")
