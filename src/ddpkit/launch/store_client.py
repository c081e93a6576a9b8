"""Connecting to a torch ``TCPStore`` on another node, within a deadline that always holds.

torch's client retries on its own clock (about twice the timeout against a closed port) and waits
for ever on a listener that accepts and never answers, inside C++ where no signal handler runs. So
the port is first reached with a plain socket, retried until the deadline, and the store's
handshake runs in a daemon thread that the caller's thread waits for in short slices: the deadline
holds to a fraction of a second and Ctrl-C and SIGTERM are handled at once. Used by the join token
(``join_store``) and the cluster doctor.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ddpkit.i18n import _

T = TypeVar("T")

SILENT = _("it accepts connections but never answered like a torch store: is something else "
           "listening on that port?")

HANDSHAKE_THREAD = "ddpkit-store-connect"


@dataclass(frozen=True)
class Connected:
    store: Any | None  # the TCPStore client, or None
    why: str | None  # why there is none


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (torch's errors run to many lines), at most 300 chars."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def reach(address: str, port: int, deadline: float) -> str | None:
    """None once a TCP connection to ``address:port`` opens before ``deadline`` (retrying refusals
    every half second), else why not."""
    why: str = _("no answer")
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return why
        try:
            with socket.create_connection((address, port), timeout=min(left, 5.0)):
                return None
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


def connect(address: str, port: int, deadline: float, *, world_size: int | None = None,
            wait_for_workers: bool = True) -> Connected:
    """A TCPStore client of ``address:port`` by ``deadline`` (a ``time.monotonic()`` value).
    ``wait_for_workers=False``: the client does not count itself in the store's ``init/`` key (a
    bystander of someone else's store, such as torchrun's rendezvous store)."""
    why = reach(address, port, deadline)
    if why is not None:
        return Connected(None, why)
    found: dict[str, Any] = {}

    def handshake() -> None:
        from torch.distributed import TCPStore  # type: ignore[attr-defined]

        left = max(1.0, deadline - time.monotonic())
        try:
            found["store"] = TCPStore(address, port, world_size, False,
                                      datetime.timedelta(seconds=left),
                                      wait_for_workers=wait_for_workers)
        except (RuntimeError, OSError) as exc:
            found["error"] = exc

    thread = threading.Thread(target=handshake, daemon=True, name=HANDSHAKE_THREAD)
    thread.start()
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.2)
    if "store" in found:
        return Connected(found["store"], None)
    return Connected(None, first_line(found["error"]) if "error" in found else SILENT)


class CallTimedOut(TimeoutError):
    """A store call did not return within the caller's deadline (the peer is gone or cut off:
    torch's client then waits for the kernel's TCP retries, minutes, whatever its own timeout)."""


def within(action: Callable[[], T], seconds: float) -> T:
    """``action()`` (one blocking store call) under a deadline the caller owns: run in a daemon
    thread that this thread waits for in short slices, so Ctrl-C and SIGTERM still work; its
    exception is raised here; CallTimedOut once ``seconds`` pass. The client is then in an unknown
    state (a call still inside it): the caller must not use it again."""
    found: dict[str, Any] = {}

    def call() -> None:
        try:
            found["value"] = action()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as is
            found["error"] = exc

    thread = threading.Thread(target=call, daemon=True, name=HANDSHAKE_THREAD)
    thread.start()
    deadline = time.monotonic() + seconds
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(min(0.2, max(0.0, deadline - time.monotonic())))
    if "error" in found:
        raise found["error"]
    if "value" not in found:
        raise CallTimedOut(_("no answer within {seconds:g} s", seconds=seconds))
    return found["value"]  # type: ignore[no-any-return]


def serve(address: str, port: int, timeout: float) -> Any:
    """A TCPStore server listening on ``address`` only (torch's own binds every interface): a
    socket bound here is handed over as ``master_listen_fd``. RuntimeError or OSError as torch
    and the socket raise them."""
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    fd = listening_fd(address, port)
    try:
        return TCPStore(address, port, None, True, datetime.timedelta(seconds=timeout),
                        wait_for_workers=False, master_listen_fd=fd)
    except (RuntimeError, OSError):
        os.close(fd)
        raise


def listening_fd(address: str, port: int) -> int:
    """A TCP socket listening on ``address``:``port`` only, as a file descriptor for TCPStore's
    ``master_listen_fd`` (the store owns it from then on, and closes it). OSError."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, port))
        listener.listen(128)
    except OSError:
        listener.close()
        raise
    return listener.detach()
