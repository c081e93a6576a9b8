"""I/O: the cluster doctor's values in the master's TCPStore, held to what every store value is.

JSON under ``doctor/``, parsed by the bounded reader (:mod:`ddpkit.launch.store_value`); every
call under a deadline (:func:`ddpkit.launch.store_client.within`), a store that goes away is
``store-lost``. With a key (the doctor run as a token-mode job: the job's key, which travelled
inside the sealed job) every value, claims included, is sealed with the join store's scheme
(:mod:`ddpkit.launch.sealed`), so only the job's nodes write values that open; per-node runs share
no secret and store plain, bounded JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ddpkit.doctor.cluster import model
from ddpkit.doctor.cluster.model import NodeRecord, ProbeReport
from ddpkit.errors import NetworkProblem
from ddpkit.i18n import _
from ddpkit.launch.sealed import Sealer
from ddpkit.launch.store_client import first_line, within

PREFIX = "doctor/"
STORE_OP_TIMEOUT_S = 10.0
PURPOSE = b"ddpkit doctor-cluster v1"


class MeetingStore:
    """JSON values under ``doctor/`` in a TCPStore (sealed when ``key`` is given)."""

    def __init__(self, store: Any, endpoint: str, key: str = "") -> None:
        self.store = store
        self.endpoint = endpoint
        self.sealer = Sealer(key, "doctor", PURPOSE) if key else None

    def _call(self, action: Callable[[], Any]) -> Any:
        try:  # under a deadline: on a dead link torch's client waits for TCP's retries (minutes)
            return within(action, STORE_OP_TIMEOUT_S + 2.0)
        except (RuntimeError, OSError) as exc:  # torch's DistError is a RuntimeError
            raise NetworkProblem(
                "store-lost", _("lost the master's store at {endpoint}: {why}",
                                endpoint=self.endpoint, why=first_line(exc)),
                _("node 0 ended before this node was done: start every node within --timeout "
                  "of the others, and keep node 0 running until they finish")) from None

    def encode(self, key: str, value: NodeRecord | ProbeReport | Mapping[str, Any]) -> bytes:
        if self.sealer is None:
            return model.encode(value)
        body = value if isinstance(value, Mapping) else value.to_dict()
        return self.sealer.seal(PREFIX + key, body)

    def decode(self, key: str, raw: bytes) -> dict[str, Any]:
        """The value under ``key``; ValueError (NotOurs) when it is not this run's."""
        if self.sealer is None:
            return model.decode_record(raw)
        return self.sealer.unseal(PREFIX + key, raw)

    def put(self, key: str, value: NodeRecord | ProbeReport | Mapping[str, Any]) -> None:
        raw = self.encode(key, value)
        self._call(lambda: self.store.set(PREFIX + key, raw))

    def has(self, key: str) -> bool:
        return bool(self._call(lambda: self.store.check([PREFIX + key])))

    def get(self, key: str) -> dict[str, Any]:
        return self.decode(key, bytes(self._call(lambda: self.store.get(PREFIX + key))))

    def add(self, key: str, amount: int) -> int:
        return int(self._call(lambda: self.store.add(PREFIX + key, amount)))

    def claim(self, key: str, mine: Mapping[str, Any]) -> dict[str, Any] | None:
        """Take ``key`` with ``mine`` (atomic ``compare_set``), taking it over from a value that is
        not a claim (junk, or with a key: anything that does not open); None when taken, else the
        claim holding it."""
        ours, current = self.encode(key, mine), b""
        for _attempt in range(3):
            found = bytes(self._call(_compare_set(self.store, PREFIX + key, current, ours)))
            if found == ours:
                return None
            try:
                held = self.decode(key, found)
                if isinstance(held.get("nonce"), str) and isinstance(held.get("hostname"), str):
                    return held
            except ValueError:
                pass
            current = found
        return {"hostname": "?", "nonce": ""}


def _compare_set(store: Any, key: str, expected: bytes, desired: bytes) -> Callable[[], Any]:
    return lambda: store.compare_set(key, expected, desired)
