"""Every network wait of `ddpkit launch` ends at its deadline (issue 11): a master port that accepts
and never answers, a closed port, a master whose peers never come. All on loopback, with a listener
the test owns; each run must end within a second or two of its deadline (generous bounds: this
bounds a wait, it does not time a speed) and leave no process behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ports import free_port

pytestmark = [pytest.mark.slow]


class SilentListener:
    """Accepts every connection on 127.0.0.1 and never sends a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
                self.accepted.append(conn)
            except OSError:
                continue

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent_listener() -> Iterator[SilentListener]:
    listener = SilentListener()
    try:
        yield listener
    finally:
        listener.close()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_"))}


def _launch(tmp_path: Path, *flags: str, limit: float = 90) -> tuple[subprocess.CompletedProcess[str],
                                                                       float]:
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ddpkit", "launch", *flags, "--run-dir",
                             str(tmp_path / "run"), str(script)], env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=limit)
    finally:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.communicate()
    took = time.monotonic() - start
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == [], leftovers
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), took


@pytest.mark.timeout(120)
def test_a_worker_against_a_silent_master_port_stops_at_the_rdzv_timeout(
        tmp_path: Path, silent_listener: SilentListener) -> None:
    done, took = _launch(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1",
                         "--master-port", str(silent_listener.port), "--rdzv-timeout", "5",
                         "--connect-timeout", "5")
    assert done.returncode == 5, done.stderr[-2000:]  # network
    assert "error [rendezvous-timeout]" in done.stderr
    assert f"127.0.0.1:{silent_listener.port} accepted the connection" in " ".join(done.stderr.split())
    assert silent_listener.accepted, "the launch never reached the listener"
    # 5 s of rendezvous + ddpkit's 2 s grace + python and torch start-up on a busy 2-core box
    assert took < 5 + 2 + 20, took


@pytest.mark.timeout(120)
def test_a_master_whose_peers_never_come_stops_at_the_rdzv_timeout(tmp_path: Path) -> None:
    port = free_port()
    done, took = _launch(tmp_path, "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
                         "--master-port", str(port), "--rdzv-timeout", "5")
    assert done.returncode == 5, done.stderr[-2000:]
    said = " ".join(done.stderr.split())  # messages wrap at 100 columns
    assert "error [rendezvous-timeout]" in said and "not every node joined" in said
    assert "fix: start the same job on every other node" in said
    assert took < 5 + 2 + 20, took


@pytest.mark.timeout(120)
def test_a_closed_master_port_fails_at_the_connect_timeout(tmp_path: Path) -> None:
    port = free_port()  # nothing listens on it
    done, took = _launch(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1",
                         "--master-port", str(port), "--connect-timeout", "4")
    assert done.returncode == 5 and "error [master-unreachable]" in done.stderr, done.stderr[-2000:]
    assert took < 4 + 10, took


@pytest.mark.timeout(120)
def test_cluster_doctor_against_a_silent_master_port_ends_within_its_timeout(
        tmp_path: Path, silent_listener: SilentListener) -> None:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ddpkit", "doctor", "--nnodes", "2", "--node-rank",
                           "1", "--master-addr", "127.0.0.1", "--master-port",
                           str(silent_listener.port), "--timeout", "15"],
                          capture_output=True, text=True, timeout=90, env=_env())
    took = time.monotonic() - start
    assert done.returncode == 5, done.stderr[-2000:]
    assert "error [master-unreachable]" in done.stderr and "never answered" in " ".join(done.stderr.split())
    assert took < 15 + 10, took


@pytest.mark.timeout(150)
@pytest.mark.parametrize(("rdzv_timeout", "late"), [("40", 10.0), ("10", 14.0)])
def test_a_worker_started_long_before_its_master_still_joins(tmp_path: Path, rdzv_timeout: str,
                                                             late: float) -> None:
    """A master ``late`` seconds late is no failure: with --rdzv-timeout >= --connect-timeout the
    worker runs torchrun while it probes (torch's start-up overlaps the master's) and its
    rendezvous clock starts when the master answers; with a shorter --rdzv-timeout, shorter than
    the master is late (torchrun would give up on the master's store first), it waits for the
    master before starting torchrun. (10 s, not 5: once both start torchrun, the rendezvous must
    complete within it on a loaded 2-core box.)"""
    port = free_port()
    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\n"
                      "dist.barrier()\nprint('rank', dist.get_rank(), 'met')\n"
                      "dist.destroy_process_group()\n")
    common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
              "--rdzv-timeout", rdzv_timeout, "--connect-timeout", "40"]
    procs = []
    try:
        for rank, delay in ((1, 0.0), (0, late)):
            time.sleep(delay)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "ddpkit", "launch", *common, "--node-rank", str(rank),
                 "--run-dir", str(tmp_path / f"node{rank}"), str(script)],
                env=_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        results = [proc.communicate(timeout=100) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for proc, (_out, err) in zip(procs, results):
        assert proc.returncode == 0, err[-2000:]
    assert "rank 0 met" in results[1][0] and "rank 1 met" in results[0][0]
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == [], leftovers
