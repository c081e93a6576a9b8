"""The job store's edge: torch's c10d TCPStore, bound to one address, holding sealed values only.

The master's :func:`host_store` binds the server to the token's address (never every interface);
a worker's :func:`connect_store` reaches it within a deadline that Ctrl-C and SIGTERM can always
cut short. :class:`JobStore` reads and writes sealed JSON (:mod:`ddpkit.launch.join.tokens`) and survives
whatever else someone writes there.
"""

from __future__ import annotations

import contextlib
import datetime
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ddpkit.errors import NetworkProblem
from ddpkit.i18n import _
from ddpkit.launch import store_client
from ddpkit.launch.join.tokens import JoinToken, seal, unseal
from ddpkit.launch.store_client import first_line
from ddpkit.launch.store_value import NotOurs, text_field

T = TypeVar("T")

STORE_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 10.0  # any one store call, whatever the network does (store_client.within)
SWEEP_BATCH = 2000  # foreign keys deleted per sweep (two a second while the master watches)


class JobStore:
    """Sealed JSON values in a TCPStore, under this run's keys.

    :meth:`read` never trusts and never dies on what it finds: a value that does not open with the
    token's key (forged, altered, moved from another key or run, oversized, too deep, not JSON) is
    ignored, counted in :attr:`rejected`, reported once per key through ``on_reject``, and replaced
    in the store by an empty value (unless a real one replaced it meanwhile) so it stops costing
    memory. Every store call runs under ``call_timeout`` (:func:`~ddpkit.launch.store_client.within`):
    one that fails or runs out marks the store lost, and that call and every later one raise
    NetworkProblem ``join-store-lost`` at once.
    """

    def __init__(self, store: Any, token: JoinToken,
                 on_reject: Callable[[str, str], None] | None = None,
                 call_timeout: float = CALL_TIMEOUT_S) -> None:
        self.store = store
        self.token = token
        self.on_reject = on_reject
        self.call_timeout = call_timeout
        self.rejected: dict[str, int] = {}
        self.removed = 0  # keys deleted by sweep()
        self.foreign_left = 0  # keys this job never wrote still there after the last sweep
        self.lost: str | None = None  # why the store was given up
        self._absent = b"\x00ddpkit-absent-" + secrets.token_hex(16).encode()

    def call(self, action: Callable[[Any], T]) -> T:
        """``action(client)`` within the deadline; NetworkProblem ``join-store-lost``."""
        if self.lost is None:
            try:
                return store_client.within(lambda: action(self.store), self.call_timeout)
            except (RuntimeError, OSError) as exc:  # torch's DistError is a RuntimeError
                self.lost = first_line(exc)
        raise NetworkProblem("join-store-lost", _("lost the job store at {endpoint} ({why})",
                                                  endpoint=self.token.endpoint, why=self.lost),
                             _("check that the master still runs and that this machine reaches "
                               "{address} (`ddpkit nics --to {address}`)",
                               address=self.token.address))

    def put(self, name: str, body: Mapping[str, Any]) -> None:
        key, sealed = self.token.key(name), seal(self.token, name, body)
        self.call(lambda s: s.set(key, sealed))

    def read(self, name: str) -> dict[str, Any] | None:
        """The value under ``name``, or None when there is none that opens with this token."""
        raw = self._raw(name)
        if raw is None:
            return None
        try:
            return unseal(self.token, name, raw)
        except NotOurs as exc:
            self._reject(name, raw, exc.why)
            return None

    def read_strict(self, name: str) -> dict[str, Any] | None:
        """Like :meth:`read`, but a value that does not open raises it (a worker's first read)."""
        raw = self._raw(name)
        return None if raw is None else unseal(self.token, name, raw)

    def claim(self, name: str, body: Mapping[str, Any], owner: str) -> bool:
        """Atomically put ``body`` under ``name`` if that slot is free, holds only a value that does
        not open (junk someone wrote there), or already holds this ``owner``'s claim (idempotent:
        re-claiming after junk replaced it is the same claim); False when another real claim holds
        it."""
        key, sealed = self.token.key(name), seal(self.token, name, body)
        current = bytes(self.call(lambda s: s.compare_set(key, "", sealed)))
        for _attempt in range(3):  # junk may be rewritten between two compare_sets; the slot is contested
            if current == sealed:
                return True
            try:
                if text_field(unseal(self.token, name, current), "claim") != owner:
                    return False
            except NotOurs as exc:
                self._count(name, exc.why)
            current = bytes(self.call(_compare_set(key, current, sealed)))
        return current == sealed

    def key_count(self) -> int:
        return int(self.call(lambda s: s.num_keys()))

    def sweep(self, names: set[str], most: int = SWEEP_BATCH) -> int:
        """Delete keys that are not one of this run's ``names`` (someone filling the master's
        memory, however few), at most ``most`` per call so one sweep never holds the master up;
        returns how many went."""
        if not hasattr(self.store, "list_keys"):  # older torch lacks it
            return 0
        mine = {self.token.key(name) for name in names}
        foreign = [k for k in self.call(lambda s: s.list_keys()) if k not in mine]
        removed = sum(1 for key in foreign[:most] if self.call(_delete(key)))
        self.removed += removed
        self.foreign_left = len(foreign) - removed
        return removed

    def clone(self) -> JobStore:
        return JobStore(self.call(lambda s: s.clone()), self.token, self.on_reject,
                        self.call_timeout)

    def _raw(self, name: str) -> bytes | None:
        """The bytes under ``name`` in one round trip that never waits for the key (``get`` would,
        for the store's timeout, if someone deleted it after a ``check``): a ``compare_set`` from
        this reader's random sentinel to itself answers the sentinel when the key is absent."""
        key, absent = self.token.key(name), self._absent
        raw = bytes(self.call(lambda s: s.compare_set(key, absent, absent)))
        if raw == absent:
            with contextlib.suppress(NetworkProblem):  # it was there and held exactly the sentinel
                self.call(lambda s: s.compare_set(key, absent, b""))
            return None
        return raw or None  # an emptied slot holds nothing

    def _reject(self, name: str, raw: bytes, why: str) -> None:
        self._count(name, why)
        key = self.token.key(name)
        with contextlib.suppress(NetworkProblem):
            self.call(lambda s: s.compare_set(key, raw, b""))

    def _count(self, name: str, why: str) -> None:
        self.rejected[name] = self.rejected.get(name, 0) + 1
        if self.rejected[name] == 1 and self.on_reject is not None:
            self.on_reject(name, why)


def _compare_set(key: str, expected: bytes, desired: bytes) -> Callable[[Any], Any]:
    return lambda store: store.compare_set(key, expected, desired)


def _delete(key: str) -> Callable[[Any], bool]:
    return lambda store: bool(store.delete_key(key))


def host_store(token: JoinToken, timeout: float = STORE_TIMEOUT_S,
               on_reject: Callable[[str, str], None] | None = None) -> JobStore:
    """Start the job store: a c10d TCPStore server listening on the token's address only.

    TCPStore itself binds every interface; it also takes a listening socket (``master_listen_fd``),
    so ddpkit binds one to the chosen interface's address and hands it over.
    """
    try:
        store = store_client.serve(token.address, token.port, timeout)
    except (RuntimeError, OSError) as exc:
        raise NetworkProblem("join-store-failed",
                             _("cannot start the job store on {endpoint}: {error}",
                               endpoint=token.endpoint, error=first_line(exc)),
                             _("free port {port} or pick another with --join-port",
                               port=token.port)) from None
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
        _("could not reach the master's job store at {endpoint} within {seconds:g} s ({why})",
          endpoint=token.endpoint, seconds=timeout, why=why),
        _("check that `ddpkit launch --nnodes N` still runs on the master and printed this "
          "token, and that this machine reaches that address (`ddpkit nics --to {address}`)",
          address=token.address), details={"endpoint": token.endpoint},
    )
