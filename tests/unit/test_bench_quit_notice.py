"""A bench master that quits tells the other nodes (issue 31): the notice on its port, the watch
that hears it within seconds, and a real store (which never speaks first) left alone."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

from ddpkit.bench import quit_notice
from ddpkit.bench.plot import source_checkout
from ddpkit.bench.quit_notice import QuitWatch, serve_notice
from ports import free_port


def test_a_watching_node_hears_the_master_quit_within_seconds() -> None:
    port = free_port()
    watch = QuitWatch("127.0.0.1", port, 1, poll_s=0.2).start()  # already waiting, as in a run
    seen: list[set[int]] = []
    time.sleep(0.5)
    quit_at = time.monotonic()
    server = threading.Thread(target=lambda: seen.append(serve_notice(
        "127.0.0.1", port, "matplotlib-missing: --plot needs \x1b[31mmatplotlib", 1, hold_s=10)))
    server.start()
    while watch.reason() is None and time.monotonic() - quit_at < 5:
        time.sleep(0.05)
    took = time.monotonic() - quit_at
    server.join(10)
    watch.stop()
    assert watch.reason() == "matplotlib-missing: --plot needs matplotlib"  # escape removed
    assert took < 5, took
    assert seen == [{1}]  # the master stopped holding the port once node 1 had seen it
    assert time.monotonic() - quit_at < 5


def test_a_port_where_a_store_listens_is_left_alone() -> None:
    """A listener that never speaks first (torch's store) gets no byte and means nothing."""
    got: list[bytes] = []
    with socket.socket() as store:
        store.bind(("127.0.0.1", 0))
        store.listen()
        store.settimeout(5)

        def accept() -> None:
            conn, _ = store.accept()
            with conn:
                conn.settimeout(3)
                got.append(conn.recv(100))  # b"" once the watcher closes without a word

        thread = threading.Thread(target=accept)
        thread.start()
        assert QuitWatch("127.0.0.1", store.getsockname()[1], 1).look() is None
        thread.join(5)
    assert got == [b""]


def test_nobody_listening_is_nothing_and_a_taken_port_skips_the_notice() -> None:
    port = free_port()
    assert QuitWatch("127.0.0.1", port, 1).look() is None
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", port))
        holder.listen()
        start = time.monotonic()
        assert serve_notice("127.0.0.1", port, "x", 1, hold_s=5) == set()
        assert time.monotonic() - start < 1


def test_the_master_stops_holding_after_its_limit() -> None:
    start = time.monotonic()
    assert serve_notice("127.0.0.1", free_port(), "x", 2, hold_s=0.5) == set()
    assert time.monotonic() - start < 3


def test_a_notice_of_another_program_or_junk_is_not_a_quit() -> None:
    for said in (b"SSH-2.0-OpenSSH_9.6\r\n", quit_notice.MAGIC + b"{not json\n"):
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            other.listen()

            def speak(sock: socket.socket = other, line: bytes = said) -> None:
                conn, _ = sock.accept()
                with conn:
                    conn.sendall(line)
                    conn.settimeout(2)
                    with contextlib.suppress(OSError):
                        conn.recv(64)

            thread = threading.Thread(target=speak)
            thread.start()
            looked = QuitWatch("127.0.0.1", other.getsockname()[1], 1).look()
            thread.join(5)
        assert looked == (None if said.startswith(b"SSH") else "no reason given")


def test_matplotlib_missing_says_how_to_install_it_in_a_source_checkout(tmp_path: Path) -> None:
    module = tmp_path / "src" / "ddpkit" / "bench" / "plot.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    assert source_checkout(str(module)) is None  # a wheel: no pyproject.toml above it
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'ddpkit'\n")
    assert source_checkout(str(module)) == tmp_path
