"""Fan-out at N: at most ``--ssh-parallel`` hosts at once, a deadline per host, one connection per host
for the whole job (``ControlMaster``) closed at its end. A fake ``ssh`` records what it was asked."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from ddpkit.launch.ssh import probe
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.remote import SshSettings, ssh_argv
from ddpkit.launch.ssh.reuse import shared_connections

FAKE_SSH = """\
#!{python}
import json, os, sys, time
log = {log!r}
host = sys.argv[sys.argv.index("--") + 1]
started = time.time()
if "-O" in sys.argv:
    with open(log, "a") as f:
        f.write(json.dumps({{"host": host, "control": sys.argv[sys.argv.index("-O") + 1]}}) + "\\n")
    sys.exit(0)
if host.startswith("dead"):
    time.sleep(30)
time.sleep(0.3)
print("ddpkit-probe " + json.dumps({{"python": "/py", "hostname": host, "ddpkit": "1.0",
                                     "torch": "2.0", "cwd": "/"}}), flush=True)
with open(log, "a") as f:
    f.write(json.dumps({{"host": host, "start": started, "end": time.time(),
                        "argv": sys.argv}}) + "\\n")
"""


def _fake_ssh(tmp_path: Path) -> tuple[str, Path]:
    log = tmp_path / "calls.jsonl"
    path = tmp_path / "ssh"
    path.write_text(FAKE_SSH.format(python=sys.executable, log=str(log)))
    os.chmod(path, 0o755)
    return str(path), log


def _calls(log: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_job_shares_one_connection_per_host_and_the_users_options_still_win() -> None:
    host = Host("10.0.0.2")
    argv = ssh_argv(host, "true", SshSettings(options=("ControlMaster=no",), control_dir="/tmp/d"))
    assert "ControlMaster=auto" in argv and "ControlPath=/tmp/d/%C" in argv
    assert argv.index("ControlMaster=no") < argv.index("ControlMaster=auto")  # ssh: first wins
    assert not any(word.startswith("Control") for word in ssh_argv(host, "true", SshSettings()))


def test_preflight_runs_at_most_parallel_hosts_at_once_and_a_dead_host_costs_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "PROBE_EXTRA_S", 1.0)
    ssh, log = _fake_ssh(tmp_path)
    hosts = [Host(f"h{i}") for i in range(7)] + [Host("dead1")]
    settings = SshSettings(connect_timeout=1, executable=ssh, parallel=3)
    started = time.monotonic()
    probes = probe.probe_hosts(hosts, local=[False] * 8, python="/py", cwd="/", settings=settings,
                               version="1.0")
    took = time.monotonic() - started
    assert [p.ok for p in probes] == [True] * 7 + [False]
    assert "no answer within 2 s" in probes[-1].problems[0]
    spans = [(c["start"], c["end"]) for c in _calls(log)]
    assert len(spans) == 7
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _end in spans)
    assert most <= 3
    # 7 quick hosts in 3 lanes take 3 x 0.3 s; the dead host holds one lane for its 2 s deadline
    assert took < 2 + 3 * 0.3 + 3.0, took


def test_every_shared_connection_is_closed_and_its_directory_removed(tmp_path: Path) -> None:
    ssh, log = _fake_ssh(tmp_path)
    hosts = [Host("h0"), Host("h1"), Host("h2")]
    with shared_connections(hosts, [True, False, False], SshSettings(executable=ssh)) as settings:
        directory = settings.control_dir
        assert directory is not None and os.path.isdir(directory)
        assert oct(os.stat(directory).st_mode & 0o777) == "0o700"
        Path(directory, "0123abcd").touch()  # what a master's socket would be
    assert not os.path.exists(directory)
    assert sorted((c["host"], c["control"]) for c in _calls(log)) == [("h1", "exit"), ("h2", "exit")]


def test_nothing_to_close_when_no_master_was_ever_opened(tmp_path: Path) -> None:
    ssh, log = _fake_ssh(tmp_path)
    with shared_connections([Host("h1")], [False], SshSettings(executable=ssh)) as settings:
        directory = settings.control_dir
    assert directory is not None and not os.path.exists(directory)
    assert _calls(log) == []


def test_no_shared_connection_when_every_host_is_this_machine(tmp_path: Path) -> None:
    ssh, log = _fake_ssh(tmp_path)
    with shared_connections([Host("a"), Host("b")], [True, True],
                            SshSettings(executable=ssh)) as settings:
        assert settings.control_dir is None
    assert _calls(log) == []


def test_parallel_must_be_positive() -> None:
    with pytest.raises(Exception, match="--ssh-parallel"):
        SshSettings(parallel=0)

