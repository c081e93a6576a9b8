"""The ssh transport: argv shape, and quoting that a real POSIX shell reads back literally."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit.errors import ConfigError, UsageError
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.remote import (
    SshSettings,
    check_ssh_option,
    describe_ssh_failure,
    remote_command,
    ssh_argv,
)

HOSTILE = [
    "; touch {marker} #",
    "$(touch {marker})",
    "`touch {marker}`",
    "it's \"quoted\" \\ and spaced",
    "line one\nline two",
    "*",
    "",
    "--flag=with=equals",
    "&& touch {marker} || true",
    "'; touch {marker}; '",
]

ECHO_ARGV = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(), " \
            "'env': {k: v for k, v in os.environ.items() if k.startswith('DDPK_')}}))"


def _through_sh(command: str) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_hostile_arguments_reach_the_program_literally(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    words = [w.format(marker=marker) for w in HOSTILE]
    workdir = tmp_path / "a dir; with $(odd) 'name'"
    workdir.mkdir()
    env = {"DDPK_VALUE": "x; touch " + str(marker), "DDPK_QUOTE": "it's"}
    command = remote_command([sys.executable, "-c", ECHO_ARGV, *words], cwd=str(workdir), env=env)
    seen = _through_sh(command)
    assert seen["argv"] == words
    assert seen["cwd"] == str(workdir)
    assert seen["env"] == env
    assert not marker.exists(), "a hostile argument was executed by the shell"


def test_remote_command_shape() -> None:
    command = remote_command(["python3", "-m", "ddpkit", "launch"], cwd="/work", env={"B": "2", "A": "1"})
    assert command == "cd -- /work && exec env A=1 B=2 python3 -m ddpkit launch"
    assert remote_command(["python3"]) == "exec python3"


@pytest.mark.parametrize("name", ["A-B", "1A", "A B", "A;B", ""])
def test_env_names_must_be_plain(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        remote_command(["python3"], env={name: "v"})
    assert caught.value.error_id == "bad-variable-name"


def test_a_program_with_equals_cannot_follow_env() -> None:
    with pytest.raises(ConfigError) as caught:
        remote_command(["/opt/a=b/python"], env={"A": "1"})
    assert caught.value.error_id == "bad-remote-program"


def test_ssh_argv_is_batch_with_timeouts_and_never_disables_host_keys() -> None:
    host = Host(name="10.0.0.3", user="ubuntu", port=2222)
    argv = ssh_argv(host, "exec true", SshSettings(connect_timeout=7, config_file="/tmp/cfg"))
    assert argv[:2] == ["ssh", "-T"]
    joined = " ".join(argv)
    assert "-o BatchMode=yes" in joined and "-o ConnectTimeout=7" in joined
    assert "ServerAliveInterval=" in joined and "ServerAliveCountMax=" in joined
    assert "StrictHostKeyChecking" not in joined and "UserKnownHostsFile" not in joined
    assert argv[argv.index("-F") + 1] == "/tmp/cfg"
    assert argv[argv.index("-l") + 1] == "ubuntu" and argv[argv.index("-p") + 1] == "2222"
    assert argv[-3:] == ["--", "10.0.0.3", "exec true"], "the host must follow `--`, unquoted"


def test_user_ssh_options_come_first_so_they_win() -> None:
    settings = SshSettings(options=("StrictHostKeyChecking=accept-new", "BatchMode=no"))
    argv = ssh_argv(Host(name="h"), "true", settings)
    first_user = argv.index("StrictHostKeyChecking=accept-new")
    assert first_user < argv.index("BatchMode=yes")
    assert argv.index("BatchMode=no") < argv.index("BatchMode=yes")  # ssh keeps the first value


@pytest.mark.parametrize("option", ["-oProxyCommand=x", "=x", "Key", "Key=\nProxyCommand x", ""])
def test_malformed_ssh_options_are_refused(option: str) -> None:
    with pytest.raises(UsageError) as caught:
        check_ssh_option(option)
    assert caught.value.error_id == "bad-ssh-option"
    with pytest.raises(UsageError):
        SshSettings(options=(option,))


def test_ssh_failure_description_picks_the_telling_line() -> None:
    lines = ["Warning: something", "ssh: connect to host 10.0.0.9 port 22: No route to host", ""]
    assert describe_ssh_failure(lines) == "ssh: connect to host 10.0.0.9 port 22: No route to host"
    assert describe_ssh_failure([]) == "ssh failed without saying why"
