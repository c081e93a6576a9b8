"""Cluster doctor session pieces that need no store server and no torch: candidates from this
node's interfaces, the JSON store wrapper (and what a vanished store becomes), polling."""

from __future__ import annotations

import time

import pytest

from ddpkit.doctor.cluster.meeting import MeetingStore
from ddpkit.doctor.cluster.model import NodeRecord
from ddpkit.doctor.cluster.session import _read, _wait_for, local_candidates
from ddpkit.errors import ConfigError, NetworkProblem
from ddpkit.net.interfaces import Address, Nic, NicKind


def nic(name: str, kind: NicKind, *addresses: tuple[str, int], up: bool = True) -> Nic:
    return Nic(name, kind, up, 1500, None,
               tuple(Address("ipv6" if ":" in a else "ipv4", a, p) for a, p in addresses),
               flags=("UP",) if up else ())


def test_candidates_are_up_routable_interfaces_traps_included_best_first() -> None:
    nics = [
        nic("lo", NicKind.LOOPBACK, ("127.0.0.1", 8)),
        nic("eth0", NicKind.VETH, ("172.17.0.4", 16), ("fe80::1", 64)),
        nic("eth1", NicKind.PHYSICAL, ("10.0.0.2", 24)),
        nic("eth2", NicKind.PHYSICAL, ("10.9.0.2", 24), up=False),
        nic("eth3", NicKind.PHYSICAL, ("fe80::3", 64)),  # link-local only
    ]
    candidates = local_candidates(nics)
    assert [(c.ifname, c.address) for c in candidates] == [("eth1", "10.0.0.2"),
                                                           ("eth0", "172.17.0.4")]
    assert candidates[0].preference < candidates[1].preference
    assert "docker-default-subnet" in candidates[1].traps


class FakeStore:
    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.counters: dict[str, int] = {}
        self.dead = False

    def _alive(self) -> None:
        if self.dead:
            raise RuntimeError("DistNetworkError: Connection reset by peer\nException raised from")

    def set(self, key: str, value: bytes) -> None:
        self._alive()
        self.values[key] = value

    def check(self, keys: list[str]) -> bool:
        self._alive()
        return all(k in self.values for k in keys)

    def get(self, key: str) -> bytes:
        self._alive()
        return self.values[key]

    def add(self, key: str, amount: int) -> int:
        self._alive()
        self.counters[key] = self.counters.get(key, 0) + amount
        return self.counters[key]

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        self._alive()  # c10d's semantics: an absent key is set only when expected is empty
        current = self.values.get(key)
        if (current is None and expected == b"") or current == expected:
            self.values[key] = desired
            return desired
        return expected if current is None else current


def test_store_values_are_json_under_the_doctor_prefix() -> None:
    fake = FakeStore()
    meeting = MeetingStore(fake, "10.0.0.2:29500")
    meeting.put("meeting", {"wire": 1, "nnodes": 2})
    assert fake.values["doctor/meeting"] == b'{"nnodes":2,"wire":1}'
    assert meeting.has("meeting") and meeting.get("meeting") == {"wire": 1, "nnodes": 2}
    assert meeting.add("claim/1", 1) == 1 and meeting.add("claim/1", 0) == 1


def test_a_vanished_store_is_a_network_problem_not_a_traceback() -> None:
    fake = FakeStore()
    meeting = MeetingStore(fake, "10.0.0.2:29500")
    fake.dead = True
    with pytest.raises(NetworkProblem) as caught:
        meeting.has("node/0")
    assert caught.value.error_id == "store-lost"
    assert "10.0.0.2:29500" in caught.value.message and "Exception raised" not in \
        caught.value.message


def test_wait_for_returns_what_is_still_missing_at_the_deadline() -> None:
    fake = FakeStore()
    meeting = MeetingStore(fake, "x:1")
    meeting.put("node/0", {"a": 1})
    started = time.monotonic()
    missing = _wait_for(meeting, ["node/0", "node/1"], time.monotonic() + 0.3)
    assert missing == ["node/1"] and 0.25 < time.monotonic() - started < 2
    meeting.put("node/1", {"a": 1})
    assert _wait_for(meeting, ["node/0", "node/1"], time.monotonic() + 5) == []


def test_malformed_record_in_the_store_names_the_node() -> None:
    fake = FakeStore()
    fake.values["doctor/node/1"] = b'{"wire": 1, "rank": 1}'
    with pytest.raises(ConfigError) as caught:
        _read(MeetingStore(fake, "x:1"), "node/1", NodeRecord.from_dict)
    assert caught.value.error_id == "doctor-version-mismatch"
    assert caught.value.message.startswith("node 1 sent a record")


def test_a_claim_is_taken_once_and_junk_under_it_is_taken_over() -> None:
    """Issue 22: the claim was a counter anyone could bump to lock a node out."""
    fake = FakeStore()
    meeting = MeetingStore(fake, "x:1")
    fake.values["doctor/claim/1"] = b"[" * 200_000  # someone else's junk
    fake.counters["doctor/claim/1"] = 5  # ... and the old counter, bumped
    assert meeting.claim("claim/1", {"nonce": "aa", "hostname": "node1"}) is None
    assert meeting.claim("claim/1", {"nonce": "bb", "hostname": "node2"}) == \
        {"nonce": "aa", "hostname": "node1"}  # a real second claimant is refused, and told who


def test_a_deeply_nested_record_is_a_clean_error_not_a_recursion_error() -> None:
    fake = FakeStore()
    fake.values["doctor/node/1"] = b"[" * 200_000
    with pytest.raises(ConfigError) as caught:
        _read(MeetingStore(fake, "x:1"), "node/1", NodeRecord.from_dict)
    assert caught.value.error_id == "doctor-version-mismatch" and "nests deeper" in \
        caught.value.message


def test_with_the_jobs_key_values_and_claims_are_sealed_and_a_forgery_is_not_a_claim() -> None:
    """A doctor run as a token-mode job seals with the job's key (the join store's scheme)."""
    fake = FakeStore()
    meeting = MeetingStore(fake, "x:1", key="k" * 32)
    meeting.put("node/1", {"hostname": "node1"})
    assert b"node1" not in fake.values["doctor/node/1"] and meeting.get("node/1") == \
        {"hostname": "node1"}
    fake.values["doctor/node/2"] = b'{"hostname": "forged"}'
    with pytest.raises(ValueError):
        meeting.get("node/2")
    fake.values["doctor/claim/1"] = b'{"nonce": "zz", "hostname": "forged"}'  # a plain claim
    assert meeting.claim("claim/1", {"nonce": "aa", "hostname": "node1"}) is None  # taken over
    other = MeetingStore(fake, "x:1", key="k" * 32)
    assert other.claim("claim/1", {"nonce": "bb", "hostname": "node2"}) == \
        {"nonce": "aa", "hostname": "node1"}
