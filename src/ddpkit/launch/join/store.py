"""The job store's edge: torch's c10d TCPStore, bound to one address, holding sealed values only.

The master's :func:`host_store` binds the server to the token's address (never every interface);
a worker's :func:`connect_store` reaches it within a deadline that Ctrl-C and SIGTERM can always
cut short. :class:`JobStore` reads and writes sealed JSON (:mod:`ddpkit.launch.join.tokens`) and survives
whatever else someone writes there.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from ddpkit.errors import JobFailed, NetworkProblem
from ddpkit.launch import store_client
from ddpkit.launch.join.tokens import JoinToken, seal, unseal
from ddpkit.launch.store_client import first_line

STORE_TIMEOUT_S = 10.0


class JobStore:
    """Sealed JSON values in a TCPStore, under this run's keys.

    :meth:`read` never trusts and never dies on what it finds: a value that does not open with the
    token's key (forged, altered, moved from another key or run, oversized, not JSON) is ignored,
    counted in :attr:`rejected`, reported once per key through ``on_reject``, and replaced in the
    store by an empty value (unless a real one replaced it meanwhile) so it stops costing memory.
    """

    def __init__(self, store: Any, token: JoinToken,
                 on_reject: Callable[[str, str], None] | None = None) -> None:
        self.store = store
        self.token = token
        self.on_reject = on_reject
        self.rejected: dict[str, int] = {}
        self.removed = 0  # keys deleted by sweep()

    def put(self, name: str, body: Mapping[str, Any]) -> None:
        self.store.set(self.token.key(name), seal(self.token, name, body))

    def read(self, name: str) -> dict[str, Any] | None:
        """The value under ``name``, or None when there is none that opens with this token."""
        raw = self._raw(name)
        if raw is None:
            return None
        try:
            return unseal(self.token, name, raw)
        except JobFailed as exc:
            self._reject(name, raw, exc)
            return None

    def read_strict(self, name: str) -> dict[str, Any] | None:
        """Like :meth:`read`, but a value that does not open raises JobFailed ``token-rejected``
        (a worker's first read: the likeliest cause is a mistyped or old token)."""
        raw = self._raw(name)
        return None if raw is None else unseal(self.token, name, raw)

    def claim(self, name: str, body: Mapping[str, Any]) -> bool:
        """Atomically put ``body`` under ``name`` if that slot is free, or holds only a value that
        does not open (junk someone wrote there); False when a real value already holds it."""
        key, sealed = self.token.key(name), seal(self.token, name, body)
        current = bytes(self.store.compare_set(key, "", sealed))
        if current == sealed:
            return True
        try:
            unseal(self.token, name, current)
            return False
        except JobFailed as exc:
            self._count(name, exc)
        return bytes(self.store.compare_set(key, current, sealed)) == sealed

    def key_count(self) -> int:
        return int(self.store.num_keys())

    def sweep(self, names: set[str], most: int) -> int:
        """When the store holds more than ``most`` keys, delete every key that is not one of this
        run's ``names`` (someone flooding the master's memory); returns how many went."""
        if self.key_count() <= most or not hasattr(self.store, "list_keys"):  # older torch lacks it
            return 0
        mine = {self.token.key(name) for name in names}
        removed = 0
        for key in list(self.store.list_keys()):
            if key not in mine and self.store.delete_key(key):
                removed += 1
        self.removed += removed
        return removed

    def clone(self) -> JobStore:
        return JobStore(self.store.clone(), self.token, self.on_reject)

    def _raw(self, name: str) -> bytes | None:
        key = self.token.key(name)
        if not self.store.check([key]):
            return None
        raw = bytes(self.store.get(key))
        return raw or None  # an emptied slot holds nothing

    def _reject(self, name: str, raw: bytes, exc: JobFailed) -> None:
        self._count(name, exc)
        with contextlib.suppress(RuntimeError, OSError):
            self.store.compare_set(self.token.key(name), raw, b"")

    def _count(self, name: str, exc: JobFailed) -> None:
        self.rejected[name] = self.rejected.get(name, 0) + 1
        if self.rejected[name] == 1 and self.on_reject is not None:
            self.on_reject(name, exc.message)


def host_store(token: JoinToken, timeout: float = STORE_TIMEOUT_S,
               on_reject: Callable[[str, str], None] | None = None) -> JobStore:
    """Start the job store: a c10d TCPStore server listening on the token's address only.

    TCPStore itself binds every interface; it also takes a listening socket (``master_listen_fd``),
    so ddpkit binds one to the chosen interface's address and hands it over.
    """
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    family = socket.AF_INET6 if ":" in token.address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((token.address, token.port))
        listener.listen(128)
        fd = listener.detach()  # the store owns the socket from here on (and closes it)
        store = TCPStore(token.address, token.port, None, True, datetime.timedelta(seconds=timeout),
                         wait_for_workers=False, master_listen_fd=fd)
    except (RuntimeError, OSError) as exc:
        listener.close()
        raise NetworkProblem("join-store-failed",
                             f"cannot start the job store on {token.endpoint}: {first_line(exc)}",
                             f"free port {token.port} or pick another with --join-port") from None
    return JobStore(store, token, on_reject)


def connect_store(token: JoinToken, timeout: float) -> JobStore:
    """Connect to the master's job store within ``timeout`` seconds, whatever answers (or does not)
    at that address (:mod:`.store_client`); Ctrl-C and SIGTERM work throughout. NetworkProblem
    ``join-master-unreachable``."""
    connected = store_client.connect(token.address, token.port, time.monotonic() + timeout)
    if connected.store is not None:
        connected.store.set_timeout(datetime.timedelta(seconds=STORE_TIMEOUT_S))
        return JobStore(connected.store, token)
    why = connected.why
    raise NetworkProblem(
        "join-master-unreachable",
        f"could not reach the master's job store at {token.endpoint} within {timeout:g} s ({why})",
        "check that `ddpkit launch --nnodes N` still runs on the master and printed this "
        "token, and that this machine reaches that address (`ddpkit nics --to "
        f"{token.address}`)", details={"endpoint": token.endpoint},
    )
