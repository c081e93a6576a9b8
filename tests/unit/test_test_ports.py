"""The ports tests hand to servers: outside the kernel's ephemeral range, free, never twice."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import ports


def test_ports_are_outside_the_ephemeral_range_free_and_unique() -> None:
    low, high = ports.ephemeral_range()
    given = [ports.free_port() for _ in range(50)]
    assert len(set(given)) == len(given)
    assert all(not low <= port <= high for port in given)
    for port in given[:5]:  # free: a server can bind it
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_given(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        monkeypatch.setattr(ports, "candidates", lambda: (busy, busy + 1))  # only that one
        assert ports.is_free(busy) is False
        with pytest.raises(RuntimeError, match="no free port"):
            ports.free_port()


def test_the_range_is_read_from_the_kernel_and_moved_past_a_low_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "range"
    table.write_text("20500\t65000\n")
    assert ports.ephemeral_range(str(table)) == (20500, 65000)
    assert ports.ephemeral_range(str(tmp_path / "none")) == (32768, 60999)
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (10000, 60000))
    assert ports.candidates() == (60001, 65536)


def test_two_processes_start_in_different_places() -> None:
    here = str(Path(ports.__file__).parent)
    code = f"import sys; sys.path.insert(0, {here!r}); import ports; print(ports.free_port())"
    got = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip() for _ in range(3)}
    assert len(got) == 3
