"""Stopping one node from outside: a reason set by a watcher thread, picked up by the main thread.

A node started by a job supervisor (the ssh fan-out, or ``ddpkit join``) must stop when the job
does: when its ssh session dies (its stdin reaches end of file) or when the job store says so.
:class:`StopSwitch` carries that reason to :func:`ddpkit.launch.node.session.execute`'s ``should_stop``
hook, which stops torchrun's whole tree. Outside that loop (a worker still waiting for its master,
say) nobody polls the hook, so if the reason is not picked up within ``grace`` seconds the switch
calls ``interrupt`` (the CLI passes "SIGTERM to myself", which it turns into a clean Ctrl-C).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


class StopSwitch:
    def __init__(self, interrupt: Callable[[], None] | None = None, grace: float = 2.0) -> None:
        self._interrupt = interrupt
        self._grace = grace
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._acknowledged = threading.Event()

    @property
    def reason(self) -> str | None:
        return self._reason

    def trigger(self, reason: str) -> None:
        """Ask the node to stop (the first reason wins)."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
        if self._interrupt is not None:
            threading.Thread(target=self._escalate, name="ddpkit-stop", daemon=True).start()

    def should_stop(self) -> str | None:
        """The hook for ``session.execute``: the reason, once there is one."""
        reason = self._reason
        if reason is not None:
            self._acknowledged.set()
        return reason

    def settle(self) -> None:
        """The node's work has ended (or is ending) on its own: a reason that comes now is
        still told, but never turns into an interrupt (one landed in the middle of a node's last
        report to a store that had just died, and the node ended with a bare ``interrupted``)."""
        self._acknowledged.set()

    def _escalate(self) -> None:
        if not self._acknowledged.wait(self._grace) and self._interrupt is not None:
            self._interrupt()


def watch_for_eof(fd: int, switch: StopSwitch, reason: str) -> threading.Thread:
    """Trigger ``switch`` once file descriptor ``fd`` reaches end of file (a daemon thread reads
    it with ``os.read``: a buffered stream's lock would block the interpreter's shutdown)."""

    def read() -> None:
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass
        switch.trigger(reason)

    thread = threading.Thread(target=read, name="ddpkit-stdin-watch", daemon=True)
    thread.start()
    return thread
