"""Real torch/Gloo/torchrun failures on loopback, captured live and diagnosed by ``doctor --log``.

Each case runs a tiny worker under ``python -m torch.distributed.run`` (or plain python) with an
outer timeout, asserts the finding id doctor names for its output, and proves that no process of
the run is left behind. ``REFRESH_DOCTOR_CAPTURES=1`` also rewrites the matching files under
tests/fixtures/logs/captured/ (the unit tests read those).

The wrong-interface Gloo capture needs two network-namespace nodes (the sim cluster) and is not
here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ports import free_port

pytestmark = pytest.mark.slow

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "captured"
OUTER_TIMEOUT = 120

WORKER = r'''
import os, signal, sys, time
from datetime import timedelta
import torch
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=5))
rank = dist.get_rank()
tensor = torch.ones(4)
if mode == "kill" and rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "hang" and rank == 1:
    time.sleep(20)  # skips the all_reduce: rank 0 times out waiting for it
    sys.exit(0)
dist.all_reduce(tensor)
dist.all_reduce(tensor)
dist.destroy_process_group()
'''

STORE_ONLY = r'''
from datetime import timedelta
import torch.distributed as dist
dist.init_process_group("gloo", timeout=timedelta(seconds=4))
'''


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without distributed settings that could leak in from the shell."""
    prefixes = ("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_", "RANK", "WORLD_SIZE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(extra or {})
    return env




@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "store_only.py").write_text(STORE_ONLY)
    return tmp_path


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port that something is already listening on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def _torchrun(workdir: Path, port: int, mode: str, env: dict[str, str] | None = None) -> str:
    argv = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port", str(port), str(workdir / "worker.py"), mode,
    ]
    return _capture(argv, workdir, clean_env(env))


def _capture(argv: list[str], workdir: Path, env: dict[str, str]) -> str:
    """Run ``argv`` in its own session; return its output; assert nothing of it survives."""
    env = {**env, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=workdir,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=OUTER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{argv} did not finish within {OUTER_TIMEOUT}s")
    finally:
        _assert_group_gone(proc.pid)
    assert proc.returncode != 0, "the failure case unexpectedly succeeded"
    return out.decode("utf-8", "replace").replace(str(workdir), "/tmp/capture")


def _assert_group_gone(pgid: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        left = []
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(p.pid) == pgid:
                    left.append(p)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for process in left:  # clean up before failing, so one bad case does not poison the rest
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    assert not left, f"processes left behind: {[p.pid for p in left]}"


def _diagnose(tmp_path: Path, name: str, text: str) -> list[dict[str, object]]:
    log = tmp_path / f"{name}.log"
    log.write_text(text)
    if os.environ.get("REFRESH_DOCTOR_CAPTURES") == "1":
        (CAPTURED / f"{name}.log").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "ddpkit", "doctor", "--log", str(log), "--json"],
                          capture_output=True, text=True, timeout=60, env=clean_env())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    findings: list[dict[str, object]] = json.loads(proc.stdout)["findings"]
    return findings


def _ids(findings: list[dict[str, object]]) -> list[object]:
    return [f["id"] for f in findings]


def test_busy_master_port(workdir: Path, busy_port: int) -> None:
    findings = _diagnose(workdir, "torchrun_port_in_use", _torchrun(workdir, busy_port, "ok"))
    assert _ids(findings)[0] == "port-in-use"
    assert str(busy_port) in str(findings[0]["explanation"])


def test_rank_killed_by_sigkill(workdir: Path) -> None:
    text = _torchrun(workdir, free_port(), "kill")
    findings = _diagnose(workdir, "torchrun_rank_sigkill", text)
    ids = _ids(findings)
    # Whether rank 0 saw its peer go before torchrun stopped it is a race (seen both ways under
    # load). When its log shows it, that lost connection is a failure the kill cannot be ordered
    # against: the killed rank comes first, and the consequence is named too. When it does not,
    # nothing but the SIGKILL failed, and causes/silent_kill.py names its usual sender, the OOM
    # killer, with the check that confirms it, before the killed rank.
    if re.search(r"Connection (?:reset|closed) by peer", text):
        assert ids[0] == "rank-failed" and "connection-lost" in ids
        killed = findings[0]
    else:
        assert ids[:2] == ["out-of-memory", "rank-failed"], ids
        assert "dmesg" in str(findings[0]["fix"])
        killed = findings[1]
    assert "Rank 1" in str(killed["explanation"])
    assert "SIGKILL" in str(killed["explanation"])


def test_hung_rank_times_out(workdir: Path) -> None:
    findings = _diagnose(workdir, "torchrun_gloo_hang", _torchrun(workdir, free_port(), "hang"))
    assert _ids(findings)[0] == "collective-timeout"
    assert "Rank 1 never completed it" in str(findings[0]["explanation"])


def test_nonexistent_gloo_interface(workdir: Path) -> None:
    text = _torchrun(workdir, free_port(), "ok", {"GLOO_SOCKET_IFNAME": "nosuch0"})
    findings = _diagnose(workdir, "torchrun_gloo_ifname_missing", text)
    assert _ids(findings)[0] == "interface-not-found"
    assert "nosuch0" in str(findings[0]["explanation"])


def test_store_waits_for_missing_rank(workdir: Path) -> None:
    env = clean_env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(free_port())})
    text = _capture([sys.executable, str(workdir / "store_only.py")], workdir, env)
    findings = _diagnose(workdir, "store_waiting_for_clients", text)
    assert _ids(findings)[0] == "rendezvous-timeout"
    assert "1 of 2" in str(findings[0]["explanation"])


def test_client_finds_no_master(workdir: Path) -> None:
    env = clean_env({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(free_port())})
    text = _capture([sys.executable, str(workdir / "store_only.py")], workdir, env)
    findings = _diagnose(workdir, "store_client_no_master", text)
    assert _ids(findings)[0] == "peer-unreachable"


def test_malformed_rendezvous_endpoint(workdir: Path) -> None:
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", "0",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.1:abc",
            str(workdir / "store_only.py")]  # rejected while parsing: nothing is dialled
    findings = _diagnose(workdir, "torchrun_bad_rdzv_endpoint", _capture(argv, workdir,
                                                                          clean_env()))
    assert _ids(findings)[0] == "rendezvous-config"


def test_master_addr_unset(workdir: Path) -> None:
    env = clean_env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": str(free_port())})
    text = _capture([sys.executable, str(workdir / "store_only.py")], workdir, env)
    findings = _diagnose(workdir, "env_master_addr_unset", text)
    assert _ids(findings)[0] == "rendezvous-config"
    assert "MASTER_ADDR" in str(findings[0]["explanation"])
