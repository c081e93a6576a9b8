"""`ddpkit join` against a master that is not there or never answers: every wait has a deadline,
and SIGINT/SIGTERM stop it at once. Loopback only: a test-made listener and a closed port."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ddpkit.errors import NetworkProblem
from ddpkit.launch.join.store import connect_store
from ddpkit.launch.join.tokens import JoinToken

pytest.importorskip("torch")

SECRET = "t0ps3cr3t-t0ps3cr3t-t0ps3cr3t"


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts every connection and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not done.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def _token(port: int) -> JoinToken:
    return JoinToken("127.0.0.1", port, "abcd1234", SECRET)


@pytest.mark.timeout(60)
def test_a_silent_listener_is_an_error_at_the_deadline(silent_listener: int) -> None:
    started = time.monotonic()
    with pytest.raises(NetworkProblem) as caught:
        connect_store(_token(silent_listener), timeout=3)
    elapsed = time.monotonic() - started
    assert caught.value.error_id == "join-master-unreachable"
    assert "never answered" in caught.value.message
    assert 2.5 < elapsed < 5.0, elapsed  # the deadline, give or take; not a speed test


@pytest.mark.timeout(60)
def test_a_closed_port_is_an_error_at_the_deadline(tcp_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(NetworkProblem) as caught:
        connect_store(_token(tcp_port), timeout=4)
    elapsed = time.monotonic() - started
    assert caught.value.error_id == "join-master-unreachable"
    assert 3.5 < elapsed < 6.0, elapsed  # torch's own retries took 2.2-2.5 x the timeout


def _join(port: int, *extra: str, token_env: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, "-m", "ddpkit", "join", "--connect-timeout", "120", "--json", *extra]
    if token_env:
        env["DDPKIT_JOIN_TOKEN"] = str(_token(port))
    else:
        args.insert(4, str(_token(port)))
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_a_join_stuck_on_a_silent_listener(
        silent_listener: int, sig: signal.Signals) -> None:
    proc = _join(silent_listener)
    try:
        time.sleep(4)  # well inside the handshake that never completes
        assert proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=10)
        assert time.monotonic() - sent < 3.0
        assert proc.returncode != 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == "zombie"


@pytest.mark.timeout(60)
def test_the_token_from_the_environment_never_shows_in_argv_or_output(tcp_port: int,
                                                                      tmp_path: Path) -> None:
    proc = _join(tcp_port, "--connect-timeout", "2", token_env=True)
    try:
        cmdline = " ".join(psutil.Process(proc.pid).cmdline())
        out, err = proc.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert SECRET not in cmdline and SECRET not in out + err
    assert json.loads(out)["error"]["id"] == "join-master-unreachable"
