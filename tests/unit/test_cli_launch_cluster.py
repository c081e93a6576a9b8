"""`ddpkit launch|test --hosts/--hostfile`, token mode and `ddpkit join` from the command line:
bad input refused before anything runs, dry-run plans quoted once, and supervised nodes that stop
when their stdin closes."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from ddpkit.errors import ExitCode


@pytest.fixture
def no_ssh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything tries to reach a host."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a host was contacted although the input was bad")

    monkeypatch.setattr("ddpkit.launch.ssh.probe.probe_hosts", refuse)
    monkeypatch.setattr("ddpkit.launch.ssh.driver.probe_hosts", refuse)


def test_a_malformed_hostfile_is_named_by_line(run_cli: Any, tmp_path: Path, no_ssh: None) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("10.0.0.2 slots=1\n10.0.0.3 slots=two\n")
    result = run_cli("launch", "--hostfile", str(hostfile), "train.py")
    assert result.code == ExitCode.CONFIG
    assert f"error [bad-hostfile]: {hostfile}:2: slots must be a whole number" in \
        " ".join(result.err.split())


@pytest.mark.parametrize("hosts", ["10.0.0.2,node;reboot", "10.0.0.2,$(id)", "-oProxyCommand=x",
                                   "10.0.0.2,'a b'"])
def test_hostile_host_names_are_refused_before_any_ssh(run_cli: Any, hosts: str, no_ssh: None) -> None:
    result = run_cli("launch", f"--hosts={hosts}", "train.py")
    assert result.code == ExitCode.CONFIG and "error [bad-hosts]" in result.err


def test_conflicting_cluster_flags(run_cli: Any, tmp_path: Path, no_ssh: None) -> None:
    (tmp_path / "h").write_text("a\n")
    both = run_cli("launch", "--hosts", "a", "--hostfile", str(tmp_path / "h"), "x.py")
    assert both.code == ExitCode.USAGE and "cannot be combined" in both.err
    mismatch = run_cli("test", "--nnodes", "3", "--hosts", "a,b")
    assert mismatch.code == ExitCode.USAGE and "error [nnodes-mismatch]" in mismatch.err
    rank = run_cli("launch", "--hosts", "a,b", "--node-rank", "1", "x.py")
    assert rank.code == ExitCode.USAGE
    option = run_cli("launch", "--hosts", "a,b", "--ssh-option=-oProxyCommand=x", "x.py")
    assert option.code == ExitCode.USAGE and "error [bad-ssh-option]" in option.err


def test_dry_run_shows_every_node_command_quoted_once(run_cli: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("HF_TOKEN", "do-not-ship-me")
    (tmp_path / ".ddpkit_env").write_text("WANDB_MODE=offline\n")
    hostile = "x; touch pwned #"
    result = run_cli("launch", "--hosts", "10.0.0.2:2,ubuntu@10.0.0.3", "--dry-run", "--json",
                     "--env", "A=1", "train.py", hostile, "--lr", "it's")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "ddpkit.launch-job-plan/1"
    node0, node1 = doc["nodes"]
    assert node0["node_argv"][-4:] == ["train.py", hostile, "--lr", "it's"]
    assert node0["node_argv"][node0["node_argv"].index("--nproc-per-node") + 1] == "2"
    ssh = node1["argv"]
    assert ssh[0] == "ssh" and ssh[-2] == "10.0.0.3" and ssh[ssh.index("-l") + 1] == "ubuntu"
    remote = shlex.split(ssh[-1])
    assert remote[remote.index("exec") + 1] != "env"  # no value in any command line: over stdin
    assert not any("NCCL_DEBUG" in word or "WANDB_MODE" in word or "A=1" in word
                   for word in remote + node0["argv"])
    assert not any("HF_TOKEN" in word for word in remote)
    assert remote[-4:] == ["train.py", hostile, "--lr", "it's"]
    assert "--env-stdin" in remote
    assert doc["env"]["overrides"] == ["A=1"]
    assert {"NCCL_DEBUG": "INFO", "WANDB_MODE": "offline"}.items() <= doc["env"]["values"].items()
    assert not (tmp_path / "pwned").exists()


def test_ddpkit_test_takes_a_hostfile(run_cli: Any, tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two nodes\n10.0.0.2 slots=1\n10.0.0.3 slots=1\n")
    result = run_cli("test", "--hostfile", str(hostfile), "--quick", "--dry-run")
    assert result.code == 0, result.err
    assert result.out.count("-m ddpkit test --nnodes 2") == 2
    assert "--quick" in result.out and "--supervised --env-stdin --json" in result.out


def test_dry_runs_mask_values_whose_names_look_secret(run_cli: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".ddpkit_env").write_text("HF_TOKEN=hf_fromfile\nWANDB_MODE=offline\n")
    hosts = run_cli("launch", "--hosts", "10.0.0.2,10.0.0.3", "--dry-run", "--env",
                    "WANDB_API_KEY=wb_fromflag", "train.py")
    joined = run_cli("launch", "--nnodes", "2", "--ifname", "lo", "--dry-run", "--json", "--env",
                     "WANDB_API_KEY=wb_fromflag", "train.py")
    node = run_cli("launch", "--dry-run", "--env", "WANDB_API_KEY=wb_fromflag", "train.py")
    for result in (hosts, joined, node):
        assert result.code == 0, result.err
        assert "fromfile" not in result.out + result.err
        assert "fromflag" not in result.out + result.err
    assert "HF_TOKEN=<hidden>" in hosts.out and "WANDB_MODE=offline" in hosts.out
    assert "WANDB_API_KEY=<hidden>" in node.out


def test_token_mode_dry_run(run_cli: Any) -> None:
    result = run_cli("launch", "--nnodes", "3", "--ifname", "lo", "--dry-run", "--json", "train.py",
                     "--epochs", "2")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "ddpkit.join-plan/2" and doc["address"] == "127.0.0.1"
    assert doc["job"]["nnodes"] == 3 and doc["job"]["entry"] == ["train.py", "--epochs", "2"]
    assert doc["node1_argv"][:6] == ["ddpkit", "launch", "--nnodes", "3", "--node-rank", "1"]


def test_join_refuses_a_bad_token(run_cli: Any) -> None:
    result = run_cli("join", "ddpk://10.0.0.2:29400/abc")
    assert result.code == ExitCode.CONFIG and "error [bad-token]" in result.err


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_join_names_an_unreachable_job_store(run_cli: Any, tcp_port: int) -> None:
    started = time.monotonic()
    result = run_cli("join", f"ddpk://127.0.0.1:{tcp_port}/abcd/{'s' * 24}", "--connect-timeout", "2")
    assert result.code == ExitCode.NETWORK, result.err
    assert f"error [join-master-unreachable]: could not reach the master's job store at " \
           f"127.0.0.1:{tcp_port}" in result.err
    assert time.monotonic() - started < 30


SLEEPER = textwrap.dedent("""
    import os, pathlib, sys, time
    pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
    time.sleep(120)
""")


def _start(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ddpkit", *argv], cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_file(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_supervised_node_stops_when_its_stdin_closes(tmp_path: Path) -> None:
    script, marker = tmp_path / "sleep.py", tmp_path / "worker.pid"
    script.write_text(SLEEPER)
    proc = _start(["launch", "--supervised", "--json", "--run-dir", str(tmp_path / "run"),
                   str(script), str(marker)], tmp_path)
    worker = _wait_file(marker, proc)
    family = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    started = time.monotonic()
    out, err = proc.communicate(input="", timeout=30)  # stdin closed: what a dying ssh session does
    assert time.monotonic() - started < 15
    assert proc.returncode == ExitCode.JOB_FAILED, err[-2000:]
    doc = json.loads(out)
    assert doc["error"]["id"] == "job-stopped" and "job supervisor let go" in doc["error"]["message"]
    assert _gone(worker) and all(_gone(pid) for pid in family)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_supervised_worker_waiting_for_its_master_stops_too(tmp_path: Path, tcp_port: int) -> None:
    (tmp_path / "x.py").write_text("print('never runs')\n")  # the entry is checked first
    proc = _start(["launch", "--supervised", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                   "127.0.0.1", "--master-port", str(tcp_port), "--connect-timeout", "60",
                   "--run-dir", str(tmp_path / "run"), "x.py"], tmp_path)
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while "waiting for the master" not in proc.stderr.readline():
        assert time.monotonic() < deadline and proc.poll() is None
    started = time.monotonic()
    _, err = proc.communicate(input="", timeout=30)
    assert time.monotonic() - started < 10, "the worker kept waiting for its master"
    # torchrun runs while the master is probed, so the node stops it as told: job-stopped
    assert proc.returncode == ExitCode.JOB_FAILED and "[job-stopped]" in err, err[-2000:]
    assert "its job supervisor let go" in err


KILLER = textwrap.dedent("""
    import datetime, os, signal, sys, time, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    if dist.get_rank() == 1:
        print("rank 1 about to SIGKILL itself", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    time.sleep(60)
""")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_fan_out_on_this_machine_names_the_sigkilled_rank(tmp_path: Path, tcp_port: int) -> None:
    """Both "hosts" are this machine (no ssh needed): the same supervisor, on loopback."""
    script = tmp_path / "kill.py"
    script.write_text(KILLER)
    proc = subprocess.run(
        [sys.executable, "-m", "ddpkit", "launch", "--hosts", "localhost,127.0.0.1", "--master-port",
         str(tcp_port), "--run-dir", str(tmp_path / "runs"), "--output-dir", str(tmp_path / "out"),
         str(script)], capture_output=True, text=True, timeout=100, cwd=tmp_path)
    assert proc.returncode == ExitCode.JOB_FAILED, proc.stderr[-3000:]
    assert "error [job-failed]: node 1 (127.0.0.1, rank 1, local rank 0) failed first: killed by " \
           "SIGKILL. Its last output: rank 1 about to SIGKILL itself" in " ".join(proc.stderr.split()), \
        proc.stderr[-3000:]
    assert "[127.0.0.1:1] " in proc.stdout and "[localhost:0] " in proc.stdout
    logs = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert logs == ["node0-localhost.log", "node0-result.json", "node1-127.0.0.1.log",
                    "node1-result.json"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["node0", "node1"]
    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if str(script) in " ".join(p.info["cmdline"] or [])]
    assert left == [], f"processes left behind: {left}"


@pytest.mark.parametrize("command", ["test", "bench"])
def test_hang_and_restart_flags_of_test_and_bench_reach_every_node(run_cli: Any, command: str) -> None:
    extra = ["--quick"] if command == "test" else []
    result = run_cli(command, "--hosts", "10.0.0.2,10.0.0.3", "--hang-timeout", "45",
                     "--hang-action", "stop", "--max-restarts", "2", "--dry-run", "--json", *extra)
    assert result.code == 0, result.err
    nodes = result.json()["nodes"]
    assert len(nodes) == 2
    for node in nodes:
        argv = node["node_argv"]
        assert argv[argv.index("--hang-timeout") + 1] == "45"
        assert argv[argv.index("--hang-action") + 1] == "stop"
        assert argv[argv.index("--max-restarts") + 1] == "2"
