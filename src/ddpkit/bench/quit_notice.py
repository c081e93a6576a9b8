"""A bench master that quits tells the other nodes, so none waits out its rendezvous timeout.

Per-node bench (``--node-rank R --master-addr A``) has no job store: the other nodes wait for the
master on its first job's port, up to the rendezvous timeout (issue 31: 11 minutes after a master
that had quit at 0.4 s). So a master that ends with an error serves a *notice* on that port for a
while: plain TCP, one line ``DDPKIT-QUIT {"reason": ...}`` sent to every connection at once (a
torch store never speaks first, so nothing else mistakes it for one). Each other node polls that
port every :data:`POLL_S` from a thread: a connection that says nothing (the master's real torch
store, during the first job) is closed without a byte sent; one that says the line is the master's
reason, acknowledged with ``seen <rank>``. The master stops serving once every other node has
acknowledged, or after :data:`HOLD_S`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable

from ddpkit.i18n import _
from ddpkit.plain_text import shown

MAGIC = b"DDPKIT-QUIT "
POLL_S = 1.0  # how often another node looks: it learns within about this (plus a connect)
HOLD_S = 30.0  # how long a master that quit waits for the other nodes to look
LISTEN_S = 0.4  # how long a poller listens for the line on a connection that opened
MOST = 4096


def _line(reason: str) -> bytes:
    return MAGIC + json.dumps({"reason": reason}).encode("utf-8")[:MOST - 64] + b"\n"


def serve_notice(address: str, port: int, reason: str, others: int, *, hold_s: float = HOLD_S,
                 clock: Callable[[], float] = time.monotonic) -> set[int]:
    """Tell every node that connects to ``address:port`` (every address when that one is not this
    machine's) that this master quit and why, until ``others`` distinct nodes said they saw it or
    ``hold_s`` passed. Returns the node ranks that saw it; an empty set when the port could not
    be taken (something else holds it: the notice is skipped, never an error of its own)."""
    listener = None
    for host in (address, ""):
        candidate = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            candidate.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            candidate.bind((host, port))
            candidate.listen(16)
            listener = candidate
            break
        except OSError:
            candidate.close()
    seen: set[int] = set()
    if listener is None:
        return seen
    line = _line(reason)
    deadline = clock() + hold_s
    with listener:
        while len(seen) < others and clock() < deadline:
            listener.settimeout(max(0.05, min(0.5, deadline - clock())))
            try:
                conn, _peer = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.settimeout(1.0)
                    conn.sendall(line)
                    answer = conn.recv(64).decode("ascii", "replace").split()
                except OSError:
                    continue
                if len(answer) == 2 and answer[0] == "seen" and answer[1].isdigit():
                    seen.add(int(answer[1]))
    return seen


class QuitWatch:
    """On a node other than the master: a daemon thread that polls the master's notice port;
    :meth:`reason` is the master's reason once it said it quit (None until then)."""

    def __init__(self, address: str, port: int, node_rank: int, *, poll_s: float = POLL_S) -> None:
        self.address, self.port, self.node_rank, self.poll_s = address, port, node_rank, poll_s
        self._reason: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddpkit-quit-watch", daemon=True)

    def start(self) -> QuitWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()

    def reason(self) -> str | None:
        return self._reason

    def _run(self) -> None:
        while not self._done.is_set():
            said = self.look()
            if said is not None:
                self._reason = said
                return
            self._done.wait(self.poll_s)

    def look(self) -> str | None:
        """One look: the master's reason if its notice answers on the port, else None."""
        try:
            with socket.create_connection((self.address, self.port), timeout=1.0) as conn:
                conn.settimeout(LISTEN_S)
                try:
                    data = conn.recv(MOST)
                except TimeoutError:
                    return None  # a real torch store: it never speaks first; nothing was sent
                if not data.startswith(MAGIC):
                    return None
                with contextlib.suppress(OSError):
                    conn.sendall(f"seen {self.node_rank}\n".encode("ascii"))
        except OSError:
            return None
        try:
            said = json.loads(data[len(MAGIC):].decode("utf-8", "replace")).get("reason")
        except (ValueError, AttributeError):
            said = None
        return shown(str(said), 2000) if said else _("no reason given")
